"""Run :mod:`collectors.profile_model` for an input folder in a process of its own, with the input's Python
and first GPU, and say where its profile file went."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from collectors.config import load_input
from collectors.errors import CollectError
from collectors.launch import PACKAGE_ROOT
from collectors.probe import check_cuda_version, probe_python


def run_profile(kind: str, input_dir: str | Path, out_dir: Path, args: list[str],
                progress: Callable[[str], None] | None = None) -> Path:
    """Profile the model of ``input_dir`` (``kind`` memory or compute, with ``profile_model``'s ``args``) into
    ``out_dir``; returns the profile file written. CollectError when the input folder is wrong, this machine
    cannot run it (stage ``environment``), or the profiling failed (stage ``run``, with its last lines)."""
    spec = load_input(input_dir)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))}
    visible = spec.global_.get("cuda_visible_devices")
    if visible:
        env["CUDA_VISIBLE_DEVICES"] = visible.split(",")[0]  # one GPU: the profile is of one device
    python = spec.global_.get("python_path") or sys.executable
    info = probe_python(python, env)
    check_cuda_version(info, spec.global_.get("cuda_version_check"))
    out_dir.mkdir(parents=True, exist_ok=True)
    command = [python, "-m", "collectors.profile_model", "--input", str(spec.folder.resolve()), "--kind", kind,
               "--out", str(out_dir.resolve()), "--model", spec.name, "--cap-size", str(spec.local["cap_size"]),
               *args]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tail: list[str] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        tail = (tail + [line.rstrip()])[-15:]
        if progress is not None and line.startswith(f"{kind}: "):
            progress(line.strip())
    out = proc.stdout.read() if proc.stdout else ""
    if proc.wait() != 0:
        raise CollectError(f"the {kind} profile of {spec.folder} failed: {tail[-1] if tail else 'no output'}",
                           detail="\n".join(tail), stage="run")
    return Path(out.strip().splitlines()[-1])
