"""traceql: trace analysis and slowdown detection for distributed PyTorch training.

    >>> import traceql
    >>> trace = traceql.read_trace("report.sqlite")
    >>> trace.sql("SELECT rank, count(*) FROM kernels GROUP BY rank")

The analysis modules load on first use, so ``traceql collect`` runs where only torch is installed.
"""

from __future__ import annotations

from typing import Any

from traceql.errors import InputError, QueryError, SchemaError, TraceqlError

__all__ = [
    "InputError",
    "QueryError",
    "SchemaError",
    "Trace",
    "TraceqlError",
    "read_trace",
    "trace_info",
]
__version__ = "0.1.0"

_LAZY = {"Trace": "traceql.trace", "read_trace": "traceql.trace", "trace_info": "traceql.info"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'traceql' has no attribute {name!r}")
