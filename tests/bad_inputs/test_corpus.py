"""Every case of the bad-input corpus ends as the README promises: the right exit code, one `error:` line that
names the file and the problem (or, where the data is still usable, a warning line naming the file, the table
and how many rows; or, for an odd input read as it is, what the output shows of it), no traceback (the
``invoke`` fixture lets none pass), and the inputs — and the folders they sit in — exactly as they were."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.bad_inputs.corpus import CASES
from tests.paths import sha256


def state(paths: list[Path]) -> dict[str, object]:
    """Each input's bytes and its folder's listing."""
    out: dict[str, object] = {}
    for p in paths:
        out[str(p)] = sha256(p) if p.is_file() else None
        out[f"{p.parent}/"] = sorted(x.name for x in p.parent.iterdir())
    return out


CASE_TIMEOUT_S = 120  # a hang is a failure of its own, not a stuck suite


class Hang(BaseException):
    """Raised by the alarm: not an Exception, so that no handler of traceql's can swallow it."""


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def ring(_signum: int, _frame: object) -> None:
        raise Hang(f"still running after {seconds} s")

    before = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def test_the_corpus_is_large_enough() -> None:
    groups = {name.split("-")[0] for name in CASES}
    assert len(CASES) >= 60 and groups >= {"file", "sqlite", "kineto", "ncu", "sql", "output", "usage"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input(invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    s = CASES[name](tmp_path)
    for key, value in s.env.items():
        monkeypatch.setenv(key, value)
    assert s.phrase or (s.code == 0 and s.shows), "a case expects a phrase of its error or warning, or what it shows"
    before = state(s.inputs)
    with time_limit(s.timeout):
        result = invoke(*s.args)
    shown = result.stdout + result.stderr
    assert "internal error" not in shown, shown[-2000:]  # exit 70: an exception the command line caught
    assert s.forbid is None or s.forbid not in shown, repr(shown[-2000:])
    assert result.exit_code == s.code, shown[-2000:]
    if s.code:
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
        assert s.phrase in result.stderr, result.stderr
        if s.names is not None:
            assert str(s.names) in result.stderr, result.stderr
    elif s.phrase:  # a warning (or a note), with the output (or in its JSON): the line that says it names the file
        said = [line for line in result.stdout.splitlines() if s.phrase in line]
        assert said, result.stdout[-2000:]
        assert s.names is None or str(s.names) in said[0], said[0]
    assert s.shows is None or s.shows in result.stdout, result.stdout[-2000:]
    assert state(s.inputs) == before
    assert not [p for p in s.absent if p.exists()]
