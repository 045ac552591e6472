"""Work run in parallel: one after another here, in local worker processes, or on a Dask distributed cluster.

    for item, result in iter_tasks(label_one, sources, common=baselines, workers=2):
        ...                              # in input order, as soon as every earlier item is done
    with Pool(workers=8) as pool:        # one cluster for several rounds of tasks
        firsts = list(pool.map(read_rank, shards))
        seconds = list(pool.map(label_rank, shards, common=summary))

``fn(item, common)`` must be a module-level function (workers unpickle it by name). ``common`` is sent once
to every worker, not once per task. With ``workers=1`` and no scheduler, the tasks run one after another in
this process and Dask is never imported. A task that fails gives its item a :class:`TraceqlError` in place
of a result (a failure in traceql itself a :class:`TaskError` naming the item), and the others go on. A
Ctrl-C cancels the tasks, closes the cluster and raises :class:`KeyboardInterrupt`.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Sized
from contextlib import closing, suppress
from pathlib import Path
from typing import Any, TypeVar, cast

from traceql.analyzers.machine import cores
from traceql.analyzers.threaded import in_order
from traceql.errors import INTERNAL_ERROR, OptionError, TraceqlError
from traceql.parallel.cluster import client, keep_ignoring_ctrl_c, probe

T = TypeVar("T")
R = TypeVar("R")
Progress = Callable[[int, int | None, str], None]  # done, total (None while unknown), the item just done

WORKER_BYTES = 2**30  # the memory a local worker is counted to need: the largest trace here labels in less


class TaskError(TraceqlError):
    """A task that failed in traceql itself (a bug) or lost its worker: one line naming the item."""

    exit_code = INTERNAL_ERROR


def max_workers() -> int:
    """The most local workers this machine runs at once: one a core this process may use, and no more than its
    available memory holds at :data:`WORKER_BYTES` each (at least 1)."""
    most = cores()
    try:
        import psutil  # distributed's own dependency

        most = min(most, int(psutil.virtual_memory().available // WORKER_BYTES))
    except (ImportError, OSError):
        pass
    return max(1, most)


def check(workers: int, scheduler: str | None) -> None:
    """OptionError unless ``workers`` is at least 1 and at most :func:`max_workers`, and at most one of the two
    ways is asked for; :class:`SchedulerUnreachable` when no Dask scheduler answers at a TCP ``scheduler``.
    Before anything is read."""
    if workers < 1:
        raise OptionError(f"--workers must be at least 1, got {workers}")
    if workers > 1 and workers > (most := max_workers()):
        raise OptionError(f"--workers {workers}: this machine runs at most {most} (one a core, "
                          f"{WORKER_BYTES // 2**30} GiB of available memory each)")
    if scheduler is not None and workers > 1:
        raise OptionError("--workers and --scheduler exclude each other: the scheduler's workers do the work")
    if scheduler is not None and not scheduler.strip():
        raise OptionError("--scheduler: give the scheduler's address, e.g. tcp://host:8786")
    if scheduler is not None:
        probe(scheduler)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _failure(name: str, exc: BaseException) -> TraceqlError:
    if isinstance(exc, TraceqlError):
        return exc
    return TaskError(f"{name}: internal error ({_first_line(exc)}); rerun with TRACEQL_DEBUG=1 (and without "
                     "--workers or --scheduler) for the traceback and please report it")


def _call(fn: Callable[[T, Any], R], item: T, common: Any, name: str) -> R | TraceqlError:
    """On a worker: run one task; its failure comes back as a value (one picklable error), not a traceback."""
    try:
        return fn(item, common)
    except Exception as exc:  # every failure of one item is that item's
        return _failure(name, exc)


def preload(module: str) -> None:
    """Import ``module``, and the modules it names in ``WARM`` (what its later work needs), in a thread of their
    own while other work runs (one that cannot be imported says so when it is used); nothing if it is loaded."""
    if module in sys.modules:
        return

    def load() -> None:
        with suppress(ImportError):
            for name in getattr(importlib.import_module(module), "WARM", ()):
                importlib.import_module(name)

    threading.Thread(target=load, name="traceql-load", daemon=True).start()


async def _load(module: str) -> None:
    """On a worker, in its main thread (run without waiting for it takes a coroutine): Ctrl-C still ignored
    (:func:`~traceql.parallel.cluster.keep_ignoring_ctrl_c`), and :func:`preload`."""
    keep_ignoring_ctrl_c()
    preload(module)


def disk_bytes(paths: Iterable[str | Path] | None) -> int:
    """The bytes of these files and of the files under these folders: a task's cost, roughly."""
    total = 0
    for path in map(Path, paths or []):
        files = path.rglob("*") if path.is_dir() else [path]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total


def _length(items: Iterable[object]) -> int | None:
    """How many items there are, when ``items`` tells (a list, a tuple); None for an iterator."""
    return len(cast(Sized, items)) if hasattr(items, "__len__") else None


def _serial(fn: Callable[[T, Any], R], items: Iterable[T], common: Any, name: Callable[[T], str],
            progress: Progress | None, total: int | None, at_once: int = 1,
            ) -> Generator[tuple[T, R | TraceqlError], None, None]:
    """Each item's task here, in order: one after another, or ``at_once`` at a time on threads (their results
    still handed out in order; ``analyzers.threaded``)."""
    if at_once > 1:
        listed = list(items)
        got = in_order(_here, listed, (fn, common, name), at_once, "traceql-task")
        for done, (item, out) in enumerate(zip(listed, got, strict=True), 1):
            if progress:
                progress(done, total, name(item))
            yield item, out
        return
    for done, item in enumerate(items, 1):
        out = _here(item, (fn, common, name))
        if progress:
            progress(done, total, name(item))
        yield item, out


def _here(item: T, how: tuple[Callable[[T, Any], R], Any, Callable[[T], str]]) -> R | TraceqlError:
    """One task run in this process (``how``: its function, what every task shares, its name): its result, or
    its failure as a value (a Ctrl-C, DuckDB's among them, raised)."""
    fn, common, name = how
    try:
        return fn(item, common)
    except TraceqlError as exc:
        return exc
    except Exception as exc:
        from traceql.model.engine import interrupted  # DuckDB's word for a Ctrl-C

        if interrupted(exc):
            raise KeyboardInterrupt from None
        if os.environ.get("TRACEQL_DEBUG"):
            raise
        return _failure(name(item), exc)


def _distributed(dask: Any, fn: Callable[[T, Any], R], items: Iterable[T], common: Any, name: Callable[[T], str],
                 progress: Progress | None, cost: Callable[[T], float] | None) -> Iterator[tuple[T, R | TraceqlError]]:
    """The tasks on the Dask client ``dask``, results handed out in input order."""
    from distributed import as_completed

    dask.run(_load, fn.__module__, wait=False)  # the workers load it while the tasks are sent and run

    shared = dask.scatter(common, broadcast=True, hash=False) if common is not None else None
    given: list[tuple[T, str]] = []
    where: dict[str, int] = {}  # a task's key -> its place in the output
    futures: list[Any] = []
    try:
        pending = as_completed()
        for item in items:  # each submitted as it comes: making an item may take time (a collection)
            given.append((item, name(item)))
            future = dask.submit(_call, fn, item, shared, given[-1][1], pure=False,
                             priority=cost(item) if cost else 0)
            where[future.key] = len(futures)
            futures.append(future)
            pending.add(future)
        results: dict[int, R | TraceqlError] = {}
        ahead = 0  # the next place to hand out
        for done, future in enumerate(pending, 1):
            i = where[future.key]
            try:
                results[i] = future.result()
            except Exception as exc:  # a lost worker, or a worker that cannot load traceql
                results[i] = TaskError(f"{given[i][1]}: the task failed on its worker ({_first_line(exc)})")
            if progress:
                progress(done, len(futures), given[i][1])
            while ahead in results:
                yield given[ahead][0], results.pop(ahead)
                ahead += 1
    finally:
        dask.cancel(futures)




class Pool:
    """Where tasks run: one after another here (``workers`` 1, no ``scheduler``), in ``workers`` local processes,
    or on the Dask scheduler at ``scheduler``. A cluster is started on the first :meth:`map` that needs it and
    serves every later one, until the pool is closed."""

    def __init__(self, workers: int = 1, scheduler: str | None = None) -> None:
        check(workers, scheduler)
        self.workers, self.scheduler = workers, scheduler
        self._opened: Any = None
        self._dask: Any = None
        self._deferred: list[Callable[[], None]] = []

    @property
    def serial(self) -> bool:
        return self.workers == 1 and self.scheduler is None

    def map(self, fn: Callable[[T, Any], R], items: Iterable[T], *, common: Any = None, name: Callable[[T], str] = str,
            progress: Progress | None = None, cost: Callable[[T], float] | None = None, at_once: int = 1,
            ) -> Iterator[tuple[T, R | TraceqlError]]:
        """``(item, fn(item, common))`` for every item, in input order, each as soon as it and every earlier one
        are done (:func:`iter_tasks`); here (no workers), ``at_once`` at a time on threads where asked (tasks
        that let go of Python's lock, each small enough that so many fit)."""
        if self.serial:
            return _serial(fn, items, common, name, progress, _length(items), at_once)
        if _length(items) == 0:  # nothing to send: no cluster to start or wait for
            return iter(())
        return _distributed(self.open(), fn, items, common, name, progress, cost)

    def open(self) -> Any:
        """Start the cluster now, if the pool has one and it is not started (say, while threads of this process
        do other work); its Dask client."""
        if self._dask is None and not self.serial:
            self._opened = client(self.workers, self.scheduler)
            self._dask = self._opened.__enter__()
        return self._dask

    def defer(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the pool closes (say, to stop helper processes that serve its tasks)."""
        self._deferred.append(callback)

    def close(self) -> None:
        while self._deferred:
            self._deferred.pop()()
        if self._opened is not None:
            opened, self._opened, self._dask = self._opened, None, None
            opened.__exit__(None, None, None)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_tasks(fn: Callable[[T, Any], R], items: Iterable[T], *, common: Any = None, workers: int = 1,
               scheduler: str | None = None, name: Callable[[T], str] = str, progress: Progress | None = None,
               cost: Callable[[T], float] | None = None) -> Generator[tuple[T, R | TraceqlError], None, None]:
    """``(item, fn(item, common))`` for every item, in input order, each as soon as it and every earlier one
    are done; a failed item gets its :class:`TraceqlError` instead. Serial in this process when ``workers`` is
    1 and no ``scheduler`` is given; else on a local cluster of ``workers`` processes, or on the Dask
    scheduler at ``scheduler``. ``progress(done, total, name)`` is called as each task finishes. The costliest
    tasks by ``cost(item)`` (say, bytes to read) start first, so that no worker is left with a long one at
    the end. Close the iterator (``contextlib.closing``) if you stop early: that cancels the tasks left and
    closes the cluster."""
    check(workers, scheduler)
    total = _length(items)
    if total is not None:  # no more processes than tasks
        workers = max(1, min(workers, total))
    if workers == 1 and scheduler is None:
        return _serial(fn, items, common, name, progress, total)
    return _pooled(fn, items, common, name, progress, workers, scheduler, cost)


def _pooled(fn: Callable[[T, Any], R], items: Iterable[T], common: Any, name: Callable[[T], str],
            progress: Progress | None, workers: int, scheduler: str | None,
            cost: Callable[[T], float] | None) -> Generator[tuple[T, R | TraceqlError], None, None]:
    with Pool(workers, scheduler) as pool:
        yield from pool.map(fn, items, common=common, name=name, progress=progress, cost=cost)


def run_tasks(fn: Callable[[T, Any], R], items: Iterable[T], *, common: Any = None, workers: int = 1,
              scheduler: str | None = None, name: Callable[[T], str] = str, progress: Progress | None = None,
              cost: Callable[[T], float] | None = None) -> list[R | TraceqlError]:
    """Every item's result (or its :class:`TraceqlError`), in input order: :func:`iter_tasks`, collected."""
    with closing(iter_tasks(fn, items, common=common, workers=workers, scheduler=scheduler, name=name,
                            progress=progress, cost=cost)) as results:
        return [out for _, out in results]
