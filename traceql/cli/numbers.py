"""Numbers as the command line writes them: counts with their noun, times in milliseconds."""

from __future__ import annotations


def counted(n: int, what: str, many: str | None = None) -> str:
    """``n`` with thousands separators and ``what``, plural unless one (``many``: the plural, else ``what`` + s):
    ``1 case``, ``6,410 rows``."""
    return f"{n:,} {what if n == 1 else (many or what + 's')}"


def ms(ns: int | float | None) -> str:
    """Nanoseconds as ``1,234.567 ms``."""
    return "-" if ns is None else f"{num_ms(ns)} ms"


def num_ms(ns: int | float | None) -> str:
    """Nanoseconds as milliseconds with three decimals, for columns whose header names the unit."""
    return "-" if ns is None else f"{ns / 1e6:,.3f}"
