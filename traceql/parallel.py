"""Per-trace work run in parallel: in local worker processes or on a Dask distributed cluster.

    for item, result in iter_tasks(label_one, sources, common=baselines, workers=2):
        ...                              # in input order, as soon as every earlier item is done

``fn(item, common)`` must be a module-level function (workers unpickle it by name). ``common`` is sent once
to every worker, not once per task. With ``workers=1`` and no scheduler, the tasks run one after another in
this process and Dask is never imported. A task that fails gives its item a :class:`TraceqlError` in place
of a result (a failure in traceql itself a :class:`TaskError` naming the item), and the others go on. A
Ctrl-C cancels the tasks, closes the cluster and raises :class:`KeyboardInterrupt`.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import socket
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from traceql.errors import INTERNAL_ERROR, OptionError, TraceqlError

T = TypeVar("T")
R = TypeVar("R")
Progress = Callable[[int, int | None, str], None]  # done, total (None while unknown), the item just done

CONNECT_TIMEOUT_S = 10.0  # to reach a scheduler given with --scheduler, and for it to answer
WORKER_BYTES = 2**30  # the memory a local worker is counted to need: the largest trace here labels in less
QUIET_LOGGERS = ("distributed", "tornado", "bokeh")
TRIM = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"


class TaskError(TraceqlError):
    """A task that failed in traceql itself (a bug) or lost its worker: one line naming the item."""

    exit_code = INTERNAL_ERROR


class SchedulerUnreachable(OptionError):
    """``--scheduler ADDRESS``: no Dask scheduler answers there."""


def max_workers() -> int:
    """The most local workers this machine runs at once: one a core this process may use, and no more than its
    available memory holds at :data:`WORKER_BYTES` each (at least 1)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    try:
        import psutil  # distributed's own dependency

        cores = min(cores, int(psutil.virtual_memory().available // WORKER_BYTES))
    except (ImportError, OSError):
        pass
    return max(1, cores)


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
        _probe(scheduler)


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


async def _load(module: str) -> None:
    """On a worker: import the module of the tasks' function ahead of the first task (a worker that cannot
    says so when the first task comes)."""
    with suppress(ImportError):
        importlib.import_module(module)


def disk_bytes(paths: Iterable[str | Path] | None) -> int:
    """The bytes of these files and of the files under these folders: a task's cost, roughly."""
    total = 0
    for path in map(Path, paths or []):
        files = path.rglob("*") if path.is_dir() else [path]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total


def _serial(fn: Callable[[T, Any], R], items: Iterable[T], common: Any, name: Callable[[T], str],
            progress: Progress | None, total: int | None) -> Iterator[tuple[T, R | TraceqlError]]:
    for done, item in enumerate(items, 1):
        try:
            out: R | TraceqlError = fn(item, common)
        except TraceqlError as exc:
            out = exc
        except Exception as exc:
            from traceql.model.engine import interrupted  # DuckDB's word for a Ctrl-C

            if interrupted(exc):
                raise KeyboardInterrupt from None
            if os.environ.get("TRACEQL_DEBUG"):
                raise
            out = _failure(name(item), exc)
        if progress:
            progress(done, total, name(item))
        yield item, out


def quiet() -> None:
    """Distributed's own log lines (ports, heartbeats, closing connections) stay off the user's stderr, and its
    workers do not sample their own stacks (a profile for a dashboard we do not start); worker processes read
    the same settings from the environment they inherit. Before distributed is imported."""
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "critical")
    os.environ.setdefault("DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED", "False")  # no dashboard to show it
    for logger in QUIET_LOGGERS:
        logging.getLogger(logger).setLevel(logging.CRITICAL)


def _probe(address: str) -> None:
    """Fail at once where a TCP scheduler address refuses connections (Dask would retry until its timeout),
    and within :data:`CONNECT_TIMEOUT_S` where something listens there that is not a Dask scheduler."""
    try:
        url = urlsplit(address if "://" in address else f"tcp://{address}")
        host, port = url.hostname, url.port
    except ValueError as exc:
        raise SchedulerUnreachable(f"--scheduler {address}: not an address ({exc}); give tcp://host:8786") from None
    if url.scheme != "tcp":
        return
    if not host or port is None:
        raise SchedulerUnreachable(f"cannot reach the Dask scheduler at {address} (no port: give tcp://host:8786)")
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except UnicodeError:  # the host name cannot be encoded for DNS: a part over 63 characters, or empty
        raise SchedulerUnreachable(f"--scheduler {address}: not a host name (a part over 63 characters, or "
                                   "empty?); give tcp://host:8786") from None
    except (OSError, OverflowError) as exc:  # OverflowError: a port past 65535
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise SchedulerUnreachable(f"cannot reach the Dask scheduler at {address} ({why.lower()})") from None
    _hello(f"tcp://{url.netloc}", address)


def _hello(url: str, address: str) -> None:
    """Ask the scheduler at ``url`` who it is, in Dask's own protocol, within :data:`CONNECT_TIMEOUT_S`: a
    service that is not Dask's never answers, or answers what Dask cannot read."""
    import asyncio

    quiet()
    from distributed.comm import connect

    async def identity() -> Any:
        comm = await connect(url, timeout=CONNECT_TIMEOUT_S)
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()

    try:
        reply = asyncio.run(asyncio.wait_for(identity(), CONNECT_TIMEOUT_S))
    except (Exception, MemoryError) as exc:  # a timeout, a closed connection, bytes that are no Dask message
        timeout = isinstance(exc, (TimeoutError, asyncio.TimeoutError))
        why = f"no answer in {CONNECT_TIMEOUT_S:g} s" if timeout else "its reply is no Dask message"
        raise SchedulerUnreachable(f"no Dask scheduler answers at {address}: something listens there but does "
                                   f"not speak Dask's protocol ({why})") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise SchedulerUnreachable(f"no Dask scheduler answers at {address}: what answers is a "
                                   f"{reply.get('type', 'service') if isinstance(reply, dict) else 'service'}, "
                                   "not a scheduler")


@contextmanager
def _workers_ignore_ctrl_c() -> Iterator[None]:
    """A Ctrl-C goes to every process of the terminal's group: the worker processes started in this block
    ignore it (SIGINT ignored is inherited), so that this process alone stops them and none of them prints a
    traceback. A Ctrl-C in the second this takes is lost."""
    try:
        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: the signals are not ours to set
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@contextmanager
def _client(workers: int, scheduler: str | None) -> Iterator[Any]:
    """A Dask client: of a local cluster of ``workers`` processes (one thread each), or of ``scheduler``."""
    quiet()
    import dask
    from distributed import Client, LocalCluster

    from traceql.model.engine import THREADS_ENV

    cluster = None
    with warnings.catch_warnings():  # "port 8787 is already in use" (another cluster's): no matter here
        warnings.simplefilter("ignore")
        if scheduler is not None:
            try:
                client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
            except (OSError, ValueError, TypeError) as exc:
                raise SchedulerUnreachable(f"cannot reach the Dask scheduler at {scheduler} ({exc})") from None
        else:
            cores = str(max(1, (os.cpu_count() or 1) // workers))  # each worker's share of the machine
            # glibc's own malloc trimming, not Dask's 64 KiB (every large frame an mmap of its own: page faults)
            with _workers_ignore_ctrl_c(), dask.config.set({TRIM: None}):
                cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None, env={"POLARS_MAX_THREADS": cores, THREADS_ENV: cores})
            client = Client(cluster)
    try:
        yield client
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            client.close()
            if cluster is not None:
                cluster.close()


def _distributed(fn: Callable[[T, Any], R], items: Iterable[T], common: Any, name: Callable[[T], str],
                 progress: Progress | None, workers: int, scheduler: str | None,
                 cost: Callable[[T], float] | None) -> Iterator[tuple[T, R | TraceqlError]]:
    with _client(workers, scheduler) as client:
        from distributed import as_completed

        client.run(_load, fn.__module__, wait=False)  # the workers load it while the tasks are sent

        shared = client.scatter(common, broadcast=True, hash=False) if common is not None else None
        given: list[tuple[T, str]] = []
        where: dict[str, int] = {}  # a task's key -> its place in the output
        futures: list[Any] = []
        try:
            pending = as_completed()
            for item in items:  # each submitted as it comes: making an item may take time (a collection)
                given.append((item, name(item)))
                future = client.submit(_call, fn, item, shared, given[-1][1], pure=False,
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
            client.cancel(futures)


def iter_tasks(fn: Callable[[T, Any], R], items: Iterable[T], *, common: Any = None, workers: int = 1,
               scheduler: str | None = None, name: Callable[[T], str] = str, progress: Progress | None = None,
               cost: Callable[[T], float] | None = None) -> Iterator[tuple[T, R | TraceqlError]]:
    """``(item, fn(item, common))`` for every item, in input order, each as soon as it and every earlier one
    are done; a failed item gets its :class:`TraceqlError` instead. Serial in this process when ``workers`` is
    1 and no ``scheduler`` is given; else on a local cluster of ``workers`` processes, or on the Dask
    scheduler at ``scheduler``. ``progress(done, total, name)`` is called as each task finishes. The costliest
    tasks by ``cost(item)`` (say, bytes to read) start first, so that no worker is left with a long one at
    the end. Close the iterator (``contextlib.closing``) if you stop early: that cancels the tasks left and
    closes the cluster."""
    check(workers, scheduler)
    if hasattr(items, "__len__"):  # no more processes than tasks
        workers = max(1, min(workers, len(items)))
    if workers == 1 and scheduler is None:
        return _serial(fn, items, common, name, progress, len(items) if hasattr(items, "__len__") else None)
    return _distributed(fn, items, common, name, progress, workers, scheduler, cost)


def run_tasks(fn: Callable[[T, Any], R], items: Iterable[T], *, common: Any = None, workers: int = 1,
              scheduler: str | None = None, name: Callable[[T], str] = str, progress: Progress | None = None,
              cost: Callable[[T], float] | None = None) -> list[R | TraceqlError]:
    """Every item's result (or its :class:`TraceqlError`), in input order: :func:`iter_tasks`, collected."""
    with closing(iter_tasks(fn, items, common=common, workers=workers, scheduler=scheduler, name=name,
                            progress=progress, cost=cost)) as results:
        return [out for _, out in results]
