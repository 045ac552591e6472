"""The Python API documents its parameters (Google style, as Holistic Trace Analysis' analyzers do): every public
function of ``traceql.commands.*`` and of the detector's module, and every public method with parameters of a
class defined there, has an ``Args:`` section naming each parameter as a ``    name: ...`` line, and a
``Returns:`` section unless it returns None; the detector's class docstring names every ``__init__``
parameter."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

import traceql.commands

COMMANDS = sorted(f"traceql.commands.{m.name}" for m in pkgutil.iter_modules(traceql.commands.__path__))
DETECTOR = "traceql.analyzers.detection.detector"
SECTION = re.compile(r"^(Args|Arguments|Returns|Yields|Raises|Examples?|Notes?|Attributes|See Also|Warnings?|"
                     r"Todo):\s*$")
ARG = re.compile(r"^    (\*{0,2}[A-Za-z_]\w*): \S")  # ``    name: what it is`` (continuation lines go deeper)


def sections(doc: str) -> dict[str, list[str]]:
    """A cleaned docstring's Google-style sections: each header's lines, up to the next header."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in doc.splitlines():
        if match := SECTION.match(line):
            current = out.setdefault(match.group(1), [])
        elif current is not None:
            current.append(line)
    return out


def documented(doc: str) -> list[str] | None:
    """The names an ``Args:`` section lists (None: no section)."""
    found = sections(doc).get("Args")
    if found is None:
        return None
    return [m.group(1) for line in found if (m := ARG.match(line))]


def parameters(fn: Callable[..., Any]) -> list[tuple[str, set[str]]]:
    """``fn``'s parameters but self/cls, each with the spellings that document it (``*args`` or ``args``)."""
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.name in ("self", "cls"):
            continue
        stars = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        out.append((p.name, {p.name, stars + p.name}))
    return out


def returns_none(fn: Callable[..., Any]) -> bool:
    return inspect.signature(fn).return_annotation in (None, "None", type(None))


def problems_of(name: str, fn: Callable[..., Any], *, args_needed: bool = True) -> list[str]:
    """What ``fn``'s docstring lacks: a docstring, an ``Args:`` section, a parameter in it (or a name in it
    that is no parameter), a ``Returns:`` section."""
    doc = inspect.getdoc(fn)
    if not doc:
        return [f"{name}: no docstring"]
    out = []
    params = parameters(fn)
    listed = documented(doc)
    if params and args_needed:
        if listed is None:
            out.append(f"{name}: no Args: section (parameters {', '.join(p for p, _ in params)})")
        else:
            out += [f"{name}: Args: lacks {p}" for p, spellings in params if not spellings & set(listed)]
    if listed is not None:
        known = set().union(*(spellings for _, spellings in params)) if params else set()
        out += [f"{name}: Args: names {n}, which is no parameter" for n in listed if n not in known]
    if not returns_none(fn) and "Returns" not in sections(doc):
        out.append(f"{name}: no Returns: section")
    return out


def public_functions(module: ModuleType) -> Iterator[tuple[str, Callable[..., Any]]]:
    """The module's own public functions (not those it imports)."""
    for name, obj in vars(module).items():
        if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == module.__name__:
            yield f"{module.__name__}.{name}", obj


def public_methods(module: ModuleType) -> Iterator[tuple[str, Callable[..., Any]]]:
    """The public methods (plain, class- and static methods; not properties) of the module's own classes."""
    for cname, cls in vars(module).items():
        if cname.startswith("_") or not inspect.isclass(cls) or cls.__module__ != module.__name__:
            continue
        for name, attr in vars(cls).items():
            fn = attr.__func__ if isinstance(attr, (classmethod, staticmethod)) else attr
            if not name.startswith("_") and inspect.isfunction(fn):
                yield f"{module.__name__}.{cname}.{name}", fn


def module_problems(module: ModuleType, *, every_method: bool) -> list[str]:
    """Each public function's problems; each public method's (with ``every_method``: also a method with no
    parameter needs ``Returns:``; else only methods with parameters are held to it)."""
    out = []
    for name, fn in public_functions(module):
        out += problems_of(name, fn)
    for name, fn in public_methods(module):
        if every_method or parameters(fn):
            out += problems_of(name, fn)
    return out


def report(problems: list[str]) -> str:
    text = "\n".join(problems)
    print(text)  # noqa: T201 - which function lacks which parameter, in the test's output too
    return text


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_function_documents_its_parameters(name: str) -> None:
    module = importlib.import_module(name)
    problems = module_problems(module, every_method=False)
    assert not problems, report(problems)


def test_the_commands_are_found() -> None:
    """The check above is not empty: it sees the commands' functions, and only their own."""
    assert {"traceql.commands.detect", "traceql.commands.profile", "traceql.commands.dataset"} <= set(COMMANDS)
    detect = importlib.import_module("traceql.commands.detect")
    seen = {name for name, _ in public_functions(detect)}
    assert {"traceql.commands.detect.detect", "traceql.commands.detect.write_rows"} <= seen
    assert "traceql.commands.detect.format_for" not in seen  # imported from traceql.export.files
    diff = importlib.import_module("traceql.commands.diff")
    assert "traceql.commands.diff.DiffResult.fails" in {name for name, _ in public_methods(diff)}


def test_the_detector_documents_its_parameters() -> None:
    module = importlib.import_module(DETECTOR)
    cls = module.SlowdownDetector
    problems = module_problems(module, every_method=True)
    doc = inspect.getdoc(cls) or ""
    listed = documented(doc)
    if listed is None:
        problems.append(f"{DETECTOR}.SlowdownDetector: the class docstring has no Args: section")
    else:
        problems += [f"{DETECTOR}.SlowdownDetector: the class docstring's Args: lacks {p}"
                     for p, spellings in parameters(cls.__init__) if not spellings & set(listed)]
    assert not problems, report(problems)


def test_the_checks_see_what_is_missing() -> None:
    """The parser itself: a parameter left out, a stale name and a missing Returns: are each found."""

    def sample(paths: list[str], *, top: int = 10, **settings: Any) -> int:
        """Summary.

        Args:
            paths: the traces.
                more on them.
            stale: gone.
            **settings: the rest.

        Returns:
            A number.
        """
        return top

    def bare(x: int) -> None:
        """No sections."""

    assert problems_of("sample", sample) == ["sample: Args: lacks top", "sample: Args: names stale, which is no "
                                             "parameter"]
    assert problems_of("bare", bare) == ["bare: no Args: section (parameters x)"]
