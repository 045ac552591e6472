"""Run :mod:`traceql.collectors.profile_model` for an input folder in a process of its own, with the input's Python
and first GPU, and say where its profile file went."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from traceql.collectors.config import InputSpec, load_input
from traceql.collectors.errors import CollectError
from traceql.collectors.launch import runtime


def run_profile(kind: str, input_dir: str | Path, out_dir: Path, args: list[str],
                progress: Callable[[str], None] | None = None) -> Path:
    """Profile the model of ``input_dir`` (``kind`` memory or compute, with ``profile_model``'s ``args``) into
    ``out_dir``; returns the profile file written. CollectError when the input folder is wrong (or a memory
    profile on CPU has no ``--memory-limit``), this machine cannot run it (stage ``environment``), or the
    profiling failed (stage ``run``, with its last lines).

    The child writes no bytecode (``PYTHONDONTWRITEBYTECODE``): importing ``define_model.py`` leaves no
    ``__pycache__`` in the input folder. ``out_dir``, when this call made it, is removed again if the
    profiling wrote nothing into it."""
    spec = load_input(input_dir)
    env, python, info = runtime(spec, {"PYTHONDONTWRITEBYTECODE": "1"}, one_gpu=True)  # one GPU: of one device
    if kind == "memory" and "--memory-limit" not in args and not info.get("gpus"):
        raise CollectError("--memory-limit: torch sees no GPU here, and on CPU the memory search needs a limit "
                           "(there is no device memory to fill): pass one, e.g. --memory-limit 4GB")
    made = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        return _run_child(kind, spec, python, env, out_dir, args, progress)
    finally:
        if made and out_dir.is_dir() and not any(out_dir.iterdir()):
            out_dir.rmdir()


def _run_child(kind: str, spec: InputSpec, python: str, env: dict[str, str], out_dir: Path, args: list[str],
               progress: Callable[[str], None] | None) -> Path:
    command = [python, "-B", "-m", "traceql.collectors.profile_model", "--input", str(spec.folder.resolve()),
               "--kind", kind, "--out", str(out_dir.resolve()), "--model", spec.name,
               "--cap-size", str(spec.local["cap_size"]), *args]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    tail: list[str] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        tail = (tail + [line.rstrip()])[-15:]
        if progress is not None and line.startswith(f"{kind}: "):
            progress(line.strip())
    lines = (proc.stdout.read() if proc.stdout else "").strip().splitlines()
    if proc.wait() != 0 or not lines:
        said = next((line for line in reversed(tail) if any(ch.isalnum() for ch in line)), "no output")
        detail = [line for line in tail if line.strip() and line.strip() != said.strip()]  # not said twice
        raise CollectError(f"the {kind} profile of {spec.folder} failed: {said.strip()}",
                           detail="\n".join(tail) if detail else "", stage="run")
    return Path(lines[-1])
