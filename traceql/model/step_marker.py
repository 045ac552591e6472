"""What marks a training step: NVTX ``step_<i>`` (``step_<i>_nosync``: an isolated step) or Kineto
``ProfilerStep#<i>`` ranges by default, or the ranges a regular expression matches (``--steps-from REGEX``,
or the ``TRACEQL_STEPS_FROM`` environment variable: a process's workers inherit it).

Such a pattern is RE2's (DuckDB's and polars' dialect). With a capture group, the group is the step's number
(digits); without one, a rank's matching ranges are its steps, numbered 1, 2, ... in the order they start.
Every step so marked is a normal one (no isolated steps).
"""

from __future__ import annotations

import os

from traceql.errors import OptionError

STEPS_ENV = "TRACEQL_STEPS_FROM"
FROM_START = os.environ.get(STEPS_ENV)  # the environment's, when the process began
DEFAULT_TEXT = r"^(step_[0-9]+(_nosync)?|ProfilerStep#[0-9]+)$"  # the default markers, as one pattern


def pattern() -> str | None:
    """The step pattern asked for (``TRACEQL_STEPS_FROM``), None for the default markers."""
    return os.environ.get(STEPS_ENV) or None


def step_text() -> str:
    """A pattern every step range's text matches: the one asked for, else the defaults'."""
    return pattern() or DEFAULT_TEXT


def described() -> str:
    """The step markers, as a message names them."""
    asked = pattern()
    return f"ranges matching --steps-from {asked!r}" if asked else "NVTX step_<i> or ProfilerStep#<i> ranges"


def groups(regex: str) -> int:
    """How many capture groups ``regex`` has, as RE2 reads it; OptionError where it reads no pattern."""
    import duckdb  # here: the command line loads this module, and not duckdb before it reads a trace

    try:
        duckdb.execute("SELECT regexp_matches('', ?)", [regex])  # RE2 compiles it, or says why not
    except duckdb.Error as err:
        raise OptionError(f"--steps-from {regex!r} is not a regular expression: {str(err).splitlines()[0]}") from err
    return _groups(regex)


def _groups(regex: str) -> int:
    """Capture groups: the ``(`` that open one (not ``(?:``, not escaped, not in a class)."""
    count, i, in_class = 0, 0, False
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(" and not regex.startswith("(?", i) or regex.startswith("(?P<", i):
            count += 1
        i += 1
    return count


def reset() -> None:
    """Back to the pattern the process began with (the environment's, else the default markers)."""
    if FROM_START is None:
        os.environ.pop(STEPS_ENV, None)
    else:
        os.environ[STEPS_ENV] = FROM_START


def use(regex: str | None) -> None:
    """Mark steps by ``regex`` from now on, in this process and the workers it starts (None: the defaults);
    OptionError where it is no pattern or has more than one capture group."""
    if regex is None:
        os.environ.pop(STEPS_ENV, None)
        return
    if not regex or groups(regex) > 1:
        raise OptionError(f"--steps-from {regex!r}: give a pattern with at most one capture group (the step's "
                          "number)")
    os.environ[STEPS_ENV] = regex
