"""Kineto traces parsed in helper processes while this one parses others: a trace is a JSON document that one
core decodes (the decoder holds Python's lock), so the traces of a run are decoded on several cores at once.

    with Helpers([(a, False), (b, False), (c, False)]) as helpers:
        first = helpers.parse(a)      # here, while a helper decodes b (and c after it)
        second = helpers.parse(b)     # the helper's, when it has it (here, where the helper died)

Only traces of :data:`HELPER_BYTES` or more on disk are given to a helper (a helper's start costs about what
decoding 30 MiB of JSON does), and only where this process may use more than one core (``$OMP_NUM_THREADS``
where set: a worker's share). Each helper is a fresh Python (``python -m traceql.sources.kineto_helpers``:
nothing of the caller's own script is run again) in a session of its own, so that a Ctrl-C reaches this
process alone, which kills them as it stops. A trace a helper cannot read gives the same error as here; a
helper that dies leaves its traces to this process.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from contextlib import suppress
from pathlib import Path
from typing import IO, Any, cast

from traceql.analyzers.units import MIB
from traceql.errors import TraceqlError
from traceql.sources.kineto_file import parse

HELPER_BYTES_ENV = "TRACEQL_HELPER_BYTES"
HELPER_BYTES = 32 * MIB


def _cores() -> int:
    """The cores this process's work may use: ``$OMP_NUM_THREADS`` where set (a worker's share), else the cores
    it may run on."""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def helper_bytes() -> int:
    """The least bytes on disk a trace is given to a helper for (``$TRACEQL_HELPER_BYTES``, else
    :data:`HELPER_BYTES`)."""
    given = os.environ.get(HELPER_BYTES_ENV, "").strip()
    return int(given) if given.isdigit() else HELPER_BYTES


def serve() -> None:
    """A helper's main: the jobs (a pickled list of (path, cpu_run)) from stdin; each trace parsed in turn and its
    result sent back on stdout (pickled): the parsed trace, its error, or None where this process should read it
    itself (a failure that is no TraceqlError, worded there)."""
    jobs = pickle.load(sys.stdin.buffer)
    with suppress(BrokenPipeError):  # the process that asked has gone
        for path, cpu_run in jobs:
            try:
                out: Any = parse(Path(path), cpu_run=cpu_run)
            except TraceqlError as exc:
                out = exc
            except Exception:  # noqa: BLE001 - the process that asked reads it again and says what is wrong
                out = None
            pickle.dump(out, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
            sys.stdout.buffer.flush()


class _Helper:
    """One helper process and the traces it parses, in order."""

    def __init__(self, jobs: list[tuple[Path, bool]]) -> None:
        self.waiting = [p for p, _ in jobs]
        # a session of its own: a Ctrl-C in the terminal reaches this process alone, which stops it
        self.proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        assert self.proc.stdin is not None
        try:
            pickle.dump([(str(p), c) for p, c in jobs], self.proc.stdin)
            self.proc.stdin.close()
        except OSError:  # it died at once: this process reads its traces
            self.waiting.clear()

    def take(self, path: Path) -> Any:
        """``path``'s parsed trace or its error; None if the helper died first (its later traces too)."""
        while self.waiting:
            nxt = self.waiting.pop(0)
            try:
                out = pickle.load(cast(IO[bytes], self.proc.stdout))  # stdout=PIPE: never None
            except (EOFError, OSError, pickle.UnpicklingError):
                self.waiting.clear()
                return None
            if nxt == path:
                return out
        return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        with suppress(OSError):
            cast(IO[bytes], self.proc.stdout).close()


class Helpers:
    """The traces ``jobs`` (path, whether a CPU-only run) shared out between this process and helpers: every
    second large trace to a helper on two cores, with more cores more helpers in turn; :meth:`parse` gives a
    trace, from its helper or parsed here."""

    def __init__(self, jobs: list[tuple[Path, bool]], *, helpers: int | None = None) -> None:
        self.jobs = dict(jobs)
        n = max(0, (_cores() - 1) if helpers is None else helpers)
        large = [(p, c) for p, c in jobs if _size(p) >= helper_bytes()]
        mine = large[::n + 1] if n else large  # this process takes the first, then every (n+1)-th
        shares = [[j for j in large if j not in mine][k::n] for k in range(n)] if n else []
        self._by_path: dict[Path, _Helper] = {}
        self._helpers: list[_Helper] = []
        try:
            for share in shares:
                if share:
                    helper = _Helper(share)
                    self._helpers.append(helper)
                    self._by_path.update({p: helper for p, _ in share})
        except BaseException:
            self.close()
            raise

    def parse(self, path: Path) -> Any:
        """``path`` parsed (``kineto_file.parse``): its helper's result, else parsed here."""
        helper = self._by_path.pop(path, None)
        out = helper.take(path) if helper is not None else None
        if isinstance(out, TraceqlError):
            raise out
        return out if out is not None else parse(path, cpu_run=self.jobs[path])

    def close(self) -> None:
        for helper in self._helpers:
            helper.stop()
        self._helpers.clear()
        self._by_path.clear()

    def __enter__(self) -> Helpers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


if __name__ == "__main__":
    serve()
