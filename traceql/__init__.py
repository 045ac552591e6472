"""traceql: trace analysis and slowdown detection for distributed PyTorch training.

    >>> import traceql
    >>> trace = traceql.read_trace("report.sqlite")
    >>> trace.sql("SELECT rank, count(*) FROM kernels GROUP BY rank")
"""

from traceql.errors import InputError, QueryError, SchemaError, TraceqlError
from traceql.info import trace_info
from traceql.trace import Trace, read_trace

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
