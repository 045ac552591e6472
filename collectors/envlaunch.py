"""Starting the ranks: one torchrun for this node, or, under mpirun/srun, this process as one rank; and
stopping them: everything this process started, on a timeout or an interrupt, with nothing left running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from traceql.collectors import manifest
from traceql.collectors.errors import CollectError, Interrupted
from traceql.collectors.session import rank_from_env

INTERRUPT_GRACE_S = 5.0  # after SIGTERM, how long the ranks get before SIGKILL when interrupted
TIMEOUT_GRACE_S = 10.0  # the same after --timeout


class Interrupts:
    """SIGINT, SIGTERM and SIGHUP while a collection runs: the first raises :class:`Interrupted` in the main
    thread (as Ctrl-C raises KeyboardInterrupt), so the ranks get stopped and the manifest written; any later
    one only sets :attr:`hurry` (stop now: SIGKILL without the grace period) and never breaks that cleanup.
    Only handlers left at Python's defaults are replaced (an ignored signal stays ignored), and only in the
    main thread; they are restored when :meth:`installed` ends."""

    SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self) -> None:
        self.hurry = threading.Event()
        self.fired: str | None = None
        self.left: list[int] = []  # what still ran after the stop (pids that ignored even SIGKILL)

    def _handler(self, signum: int, _frame: Any) -> None:
        if self.fired is None:
            self.fired = signal.Signals(signum).name
            raise Interrupted(self.fired)
        self.hurry.set()

    def defer(self) -> None:
        """From now on a signal only hurries what is left (writing the manifest goes on)."""
        if self.fired is None:
            self.fired = ""

    @contextmanager
    def installed(self) -> Iterator[Interrupts]:
        saved: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                sig = getattr(signal, name, None)
                if sig is None:
                    continue
                current = signal.getsignal(sig)
                if current is (signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL):
                    saved[sig] = signal.signal(sig, self._handler)
        try:
            yield self
        finally:
            for sig, old in saved.items():
                signal.signal(sig, old)


def _ppid_state(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter) of a live process from /proc; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[0]


def _exists(pid: int) -> bool:
    """Whether ``pid`` is there at all, a zombie too."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, dead but not yet reaped, does not)."""
    if os.path.isdir("/proc/self"):
        info = _ppid_state(pid)
        return info is not None and info[1] not in "ZX"
    return _exists(pid)


def _descendants(root: int) -> set[int]:
    """Every process under ``root`` (Linux /proc; none elsewhere)."""
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return set()
    children: dict[int, list[int]] = {}
    for pid in pids:
        info = _ppid_state(pid)
        if info is not None:
            children.setdefault(info[0], []).append(pid)
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _of_run(pid: int, run: Path) -> bool:
    """Whether ``pid`` is a rank of ``run`` (its environment names the run folder; unknown without /proc)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except FileNotFoundError:
        return not os.path.isdir("/proc/self")
    except OSError:
        return False
    return f"TRACEQL_RUN_DIR={Path(run).resolve()}".encode() in env


def _rank_pids(run: Path, ranks: set[int] | None) -> set[int]:
    """The pids that the unfinished ranks of this host recorded in their results (``ranks``: only those),
    where they still are ranks of this run."""
    host = socket.gethostname()
    pids = {int(r["pid"]) for rank, r in manifest.read_results(run).items()
            if r.get("status") == "running" and r.get("pid") and r.get("host", host) == host
            and (ranks is None or rank in ranks)}
    return {pid for pid in pids if _of_run(pid, run)}


def stop(proc: subprocess.Popen, run: Path, *, grace: float, hurry: threading.Event | None = None,
         ranks: set[int] | None = None) -> list[int]:
    """Stop ``proc`` (started in a session of its own) and every process under it: SIGTERM to its process
    group and to the group of each process under it (torchrun starts every rank in a session of its own;
    the ranks' recorded pids count too), then SIGKILL to whatever is left after ``grace`` seconds (at once
    when ``hurry`` is set). Returns the pids still running after that (none, unless one ignores SIGKILL)."""
    own = os.getpgrp()
    known = {proc.pid} | _rank_pids(run, ranks)

    def running() -> set[int]:
        if proc.poll() is None:  # (once it is reaped its pid may be another's)
            known.update(_descendants(proc.pid))  # those whose parent died meanwhile stay known
        return {pid for pid in known - {proc.pid} if _alive(pid)} | ({proc.pid} if proc.poll() is None else set())

    def send(sig: int, pids: set[int]) -> None:
        groups = set()
        for pid in pids:
            try:
                groups.add(os.getpgid(pid))
            except ProcessLookupError:
                continue
        for group in groups - {own, 0, 1}:
            try:
                os.killpg(group, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in pids:  # one that shares our own group gets it alone
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    left = running()
    send(signal.SIGTERM, left)
    deadline = time.monotonic() + grace
    while left and time.monotonic() < deadline and not (hurry is not None and hurry.is_set()):
        try:
            time.sleep(0.05)
        except KeyboardInterrupt:  # one more Ctrl-C where our handler is not installed: hurry
            break
        left = running()
    if left - {proc.pid}:  # the ranks first: the launcher, still there, reaps them (no zombie is left)
        send(signal.SIGKILL, left - {proc.pid})
        deadline = time.monotonic() + 1.0
        while proc.poll() is None and any(_exists(pid) for pid in left - {proc.pid}) and time.monotonic() < deadline:
            time.sleep(0.02)
        left = running()
    if left:
        send(signal.SIGKILL, left)
        deadline = time.monotonic() + 5.0  # until the kernel has taken them
        while left and time.monotonic() < deadline:
            time.sleep(0.02)
            left = running()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    return sorted(running())


def exit_codes_of(run: Path, world: int) -> dict[int, int | None]:
    results = manifest.read_results(run)
    codes: dict[int, int | None] = {}
    for rank in range(world):
        status = results.get(rank, {}).get("status")
        codes[rank] = 0 if status == "ok" else 1 if status == "failed" else None
    return codes


def _wait_for_peers(run: Path, world: int, deadline: float | None) -> bool:
    """Rank 0 under mpirun/srun: wait until every rank has written its final result."""
    while True:
        done = [r for r in manifest.read_results(run).values() if r.get("status") in ("ok", "failed")]
        if len(done) >= world:
            return True
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(1.0)


def _supervise(cmd: list[str], env: dict[str, str], log: Any, run: Path, wait: Callable[[subprocess.Popen], str],
               interrupts: Interrupts | None, ranks: set[int] | None) -> str:
    """Start ``cmd`` in a session of its own and ``wait`` for it. Whatever ends the wait early (an interrupt,
    or any other exception) first stops it and every process under it."""
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        return wait(proc)
    except BaseException:
        left = stop(proc, run, grace=INTERRUPT_GRACE_S, hurry=interrupts.hurry if interrupts else None, ranks=ranks)
        if interrupts is not None:
            interrupts.left = left
        raise


def run_ranks(spec: Any, lopts: Any, python: str, launch_json: Path, run: Path, env: dict[str, str],
              progress: Callable[[str], None] | None, *, launcher_command: Callable[..., list[str]],
              wait: Callable[..., str], interrupts: Interrupts | None = None) -> tuple[str, dict[int, int | None]]:
    """Start the ranks, wait for them within ``lopts.timeout``; (status, exit code per rank).

    Interrupted (KeyboardInterrupt, or :class:`Interrupted` for SIGTERM), it stops what it started — the
    launcher and every rank, or under mpirun/srun this process's own rank — and raises again."""
    world = spec.local["world_size"]
    log = (run / "logs" / "launcher.log").open("ab")
    waiting = lambda proc: wait(proc, lopts.timeout, progress, run, world)  # noqa: E731 - one line
    if lopts.launcher == "torchrun":
        cmd = launcher_command(python, spec, lopts, launch_json)
        log.write((" ".join(cmd) + "\n").encode())
        log.flush()
        status = _supervise(cmd, env, log, run, waiting, interrupts, None)
        return status, exit_codes_of(run, world)
    if lopts.launcher != "env":
        raise CollectError(f"unknown launcher {lopts.launcher!r}; choose torchrun or env")
    rank = rank_from_env()[0]  # checked against world_size before anything was made (check_env_ranks)
    deadline = None if lopts.timeout is None else time.monotonic() + lopts.timeout
    status = _supervise([python, "-m", "traceql.collectors.rankwrap", str(launch_json)], env, log, run, waiting,
                        interrupts, {rank})
    if rank == 0 and status == "complete" and not _wait_for_peers(run, world, deadline):
        status = "timeout"
    codes = exit_codes_of(run, world)
    if status == "complete" and any(c != 0 for c in codes.values()):
        status = "failed"
    return status, codes
