"""Tasks of this process run a few at a time on threads, their results handed out in order: work that lets go
of Python's lock (compiled passes, polars) takes about 0.7 times as long two at a time on two cores."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def in_order(fn: Callable[[T, Any], Any], items: list[T], common: Any, at_once: int,
             name: str = "traceql-task") -> Iterator[Any]:
    """``fn(item, common)`` for each item in order, at most ``at_once`` running at a time on threads named
    ``name`` (one after another here where ``at_once`` is 1); a failure is raised where its item's result would
    come, and the items not begun are dropped."""
    at_once = min(at_once, len(items))
    if at_once <= 1:
        yield from (fn(item, common) for item in items)
        return
    left = iter(items)
    with ThreadPoolExecutor(at_once, thread_name_prefix=name) as pool:
        running: deque[Future[Any]] = deque(pool.submit(fn, next(left), common) for _ in range(at_once))
        try:
            while running:
                done = running.popleft().result()
                running.extend(pool.submit(fn, item, common) for item in [next(left, None)] if item is not None)
                yield done
        finally:
            for waiting in running:
                waiting.cancel()
