"""traceql: trace analysis and slowdown detection for distributed PyTorch training.

    >>> import traceql
    >>> trace = traceql.read_trace("report.sqlite")
    >>> trace.sql("SELECT rank, count(*) FROM kernels GROUP BY rank")
    >>> result = traceql.detect("ddp.sqlite", baseline=["single_gpu.sqlite"])
    >>> traceql.ranks("runs/gpt2-nsys").stragglers       # the rank the others waited for, step by step
    >>> traceql.diff("before.sqlite", "after.sqlite").verdict
    >>> traceql.whatif("runs/gpt2-nsys").runs[0].text      # what each cause costs in step time

Every command is a function of ``traceql.commands.<command>``; the names here are the common ones. The
analysis modules load on first use, so ``traceql collect`` runs where only torch is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traceql.errors import CollectFailed, InputError, OptionError, QueryError, SchemaError, TraceqlError
from traceql.version import __version__

if TYPE_CHECKING:  # what __getattr__ loads, as type checkers see it (nothing of it is imported at run time)
    from traceql.analyzers.detection.detector import SlowdownDetector
    from traceql.commands.detect import detect
    from traceql.commands.diff import DiffResult, diff
    from traceql.commands.info import trace_info
    from traceql.commands.ranks import RanksResult, ranks
    from traceql.commands.solve import solve
    from traceql.commands.whatif import WhatIfResult, whatif
    from traceql.dataset.store import Dataset
    from traceql.labelling.result import DetectResult
    from traceql.trace import Trace, read_trace

__all__ = [
    "__version__",
    "CollectFailed",
    "Dataset",
    "DetectResult",
    "DiffResult",
    "InputError",
    "OptionError",
    "QueryError",
    "RanksResult",
    "SchemaError",
    "SlowdownDetector",
    "Trace",
    "TraceqlError",
    "detect",
    "diff",
    "ranks",
    "read_trace",
    "solve",
    "trace_info",
    "whatif",
    "WhatIfResult",
]

_LAZY = {"Trace": "traceql.trace", "read_trace": "traceql.trace", "trace_info": "traceql.commands.info",
         "detect": "traceql.commands.detect", "DetectResult": "traceql.labelling.result",
         "SlowdownDetector": "traceql.analyzers.detection.detector", "Dataset": "traceql.dataset.store",
         "ranks": "traceql.commands.ranks", "RanksResult": "traceql.commands.ranks",
         "diff": "traceql.commands.diff", "DiffResult": "traceql.commands.diff", "solve": "traceql.commands.solve",
         "whatif": "traceql.commands.whatif", "WhatIfResult": "traceql.commands.whatif"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'traceql' has no attribute {name!r}")
