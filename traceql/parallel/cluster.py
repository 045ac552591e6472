"""The Dask side of ``traceql.parallel``: a client of a local cluster or of a scheduler given by address, the
scheduler's address checked first (one line within seconds where nothing, or something else than Dask,
answers), distributed's own logging kept off the user's stderr."""

from __future__ import annotations

import logging
import os
import signal
import socket
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from traceql.analyzers.machine import cores
from traceql.errors import OptionError

CONNECT_TIMEOUT_S = 10.0  # to reach a scheduler given with --scheduler, and for it to answer
QUIET_LOGGERS = ("distributed", "tornado", "bokeh")
TRIM = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"


class SchedulerUnreachable(OptionError):
    """``--scheduler ADDRESS``: no Dask scheduler answers there."""


def quiet() -> None:
    """Distributed's own log lines (ports, heartbeats, closing connections) stay off the user's stderr, and its
    workers do not sample their own stacks (a profile for a dashboard we do not start); worker processes read
    the same settings from the environment they inherit. Before distributed is imported."""
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "critical")
    os.environ.setdefault("DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED", "False")  # no dashboard to show it
    for logger in QUIET_LOGGERS:
        logging.getLogger(logger).setLevel(logging.CRITICAL)


def probe(address: str) -> None:
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


def keep_ignoring_ctrl_c() -> None:
    """On a worker started ignoring Ctrl-C (:func:`_workers_ignore_ctrl_c`), in its main thread: ignore it still.
    polars answers SIGINT itself once it has run a query, even where it was ignored, and a Ctrl-C in the
    terminal would then stop the worker mid-task with a traceback of its own: a query is run, and SIGINT
    ignored again. A worker of the user's own cluster keeps its signals as they are."""
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        return
    import polars as pl

    pl.DataFrame({"a": [1]}).lazy().select(pl.col("a") * 2).collect()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def client(workers: int, scheduler: str | None) -> Iterator[Any]:
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
            # each worker's share of the machine: DuckDB's, polars' and the detector's threads (OMP_NUM_THREADS)
            share = str(max(1, cores() // workers))
            # glibc's own malloc trimming, not Dask's 64 KiB (every large frame an mmap of its own: page faults)
            with _workers_ignore_ctrl_c(), dask.config.set({TRIM: None}):
                env = {"POLARS_MAX_THREADS": share, THREADS_ENV: share, "OMP_NUM_THREADS": share}
                cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None, env=env)
            client = Client(cluster)
    try:
        yield client
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            client.close()
            if cluster is not None:
                cluster.close()
