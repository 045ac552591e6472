"""The console's width is set afresh by every command: ``--wide`` in one run never reaches the next one in the
same process (tests, notebooks and the Python API run many commands in one interpreter)."""

from __future__ import annotations

import pytest


def _widest(text: str) -> int:
    return max(map(len, text.splitlines()))


def test_wide_does_not_leak_into_the_next_command(invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    wide = invoke("--wide", "info")
    assert wide.exit_code == 0 and _widest(wide.stdout) > 80  # the embedded kernels' names, unfolded
    after = invoke("info")
    assert after.exit_code == 0 and _widest(after.stdout) <= 80
    assert after.stdout != wide.stdout
