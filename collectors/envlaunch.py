"""Starting the ranks: one torchrun for this node, or, under mpirun/srun, this process as one rank."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collectors import manifest
from collectors.errors import CollectError
from collectors.session import rank_from_env


def _exit_codes(run: Path, world: int) -> dict[int, int | None]:
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


def run_ranks(spec: Any, lopts: Any, python: str, launch_json: Path, run: Path, env: dict[str, str],
              progress: Callable[[str], None] | None, *, launcher_command: Callable[..., list[str]],
              wait: Callable[..., str]) -> tuple[str, dict[int, int | None]]:
    """Start the ranks, wait for them within ``lopts.timeout``; (status, exit code per rank)."""
    world = spec.local["world_size"]
    log = (run / "logs" / "launcher.log").open("ab")
    if lopts.launcher == "torchrun":
        cmd = launcher_command(python, spec, lopts, launch_json)
        log.write((" ".join(cmd) + "\n").encode())
        log.flush()
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        status = wait(proc, lopts.timeout, progress, run, world)
        return status, _exit_codes(run, world)
    if lopts.launcher != "env":
        raise CollectError(f"unknown launcher {lopts.launcher!r}; choose torchrun or env")
    rank, env_world, _ = rank_from_env()
    if env_world != world:
        raise CollectError(f"the launcher started {env_world} ranks, local_config.json world_size is {world}")
    deadline = None if lopts.timeout is None else time.monotonic() + lopts.timeout
    proc = subprocess.Popen([python, "-m", "collectors.rankwrap", str(launch_json)], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    status = wait(proc, lopts.timeout, progress, run, world)
    if rank == 0 and status == "complete" and not _wait_for_peers(run, world, deadline):
        status = "timeout"
    codes = _exit_codes(run, world)
    if status == "complete" and any(c != 0 for c in codes.values()):
        status = "failed"
    return status, codes
