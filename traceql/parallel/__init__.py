"""Work run in parallel: one after another here, in local worker processes, or on a Dask distributed cluster
(``pool``: tasks and their failures; ``cluster``: starting and probing clusters)."""

from traceql.analyzers.machine import cores
from traceql.parallel.cluster import SchedulerUnreachable, quiet
from traceql.parallel.pool import (
    Pool,
    Progress,
    TaskError,
    check,
    disk_bytes,
    iter_tasks,
    max_workers,
    preload,
    run_tasks,
)

__all__ = ["Pool", "Progress", "SchedulerUnreachable", "TaskError", "check", "cores", "disk_bytes", "iter_tasks",
           "max_workers", "preload", "quiet", "run_tasks"]
