"""What the launcher starts for every rank: send the rank's output to its log, wrap it in the profiler if
this rank is profiled, and become that command. Python's fault handler is on in the rank (``PYTHONFAULTHANDLER``,
unless the environment sets it): a rank that dies of a signal (a crash in native code, such as a corrupted heap)
leaves ``Fatal Python error`` and its Python stack in its log, and ``collect`` names it as the cause.

    python -m traceql.collectors.rankwrap RUN_DIR/launch.json
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from traceql.collectors.profilers import ProfilerOptions, wrap_command
from traceql.collectors.session import rank_from_env


def rank_command(spec: dict, rank: int) -> list[str]:
    """The full command of ``rank``: the driver (or train_script.py), under the profiler when profiled."""
    opts = ProfilerOptions(**spec["profiler"])
    command = list(spec["command"])
    if opts.name in ("nsys", "ncu") and rank in spec["profile_ranks"]:
        base = Path(spec["run"]) / "traces" / f"{spec['run_name']}_rank{rank}"
        binary = Path(spec["binary"]) if spec.get("binary") else None
        return wrap_command(opts, binary, base, command)
    return command


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    rank = rank_from_env()[0]
    log = Path(spec["run"]) / "logs" / f"rank{rank}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    command = rank_command(spec, rank)
    print(f"[rank {rank}] {' '.join(command)}", flush=True)
    env = {"PYTHONFAULTHANDLER": "1", **os.environ, **spec.get("env", {})}
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main()
