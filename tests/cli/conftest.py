"""The terminal widths the command line's tests print at."""

from __future__ import annotations

import pytest

from traceql.cli import common


@pytest.fixture(params=[80, 100])
def width(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """The console at 80 columns, then at 100 (``COLUMNS``, as a terminal of that width; every command sets the
    console's width from it)."""
    monkeypatch.setenv("COLUMNS", str(request.param))
    monkeypatch.setattr(common.console, "width", request.param)
    return request.param


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> int:
    """The console at 80 columns."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(common.console, "width", 80)
    return 80
