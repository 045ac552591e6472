"""What the training Python can do: torch, CUDA and NCCL versions, GPUs — asked before launching anything."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from traceql.collectors.errors import CollectError

PROBE = """
import json, sys
out = {"python": sys.version.split()[0]}
try:
    import torch
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
else:
    out.update(torch=torch.__version__, cuda=torch.version.cuda, gpus=torch.cuda.device_count(),
               gloo=torch.distributed.is_gloo_available(), nccl_available=torch.distributed.is_nccl_available())
    if out["gpus"]:
        out["gpu_names"] = [torch.cuda.get_device_name(i) for i in range(out["gpus"])]
        try:
            out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:
            out["nccl"] = None
print(json.dumps(out))
"""


def probe_python(python: str, env: dict[str, str]) -> dict:
    """Run the training interpreter once to learn its torch/CUDA/NCCL versions and visible GPUs."""
    if not Path(python).exists():
        raise CollectError(f"python not found at {python} (global_config.json python_path)",
                           stage="environment")
    try:
        res = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired:
        raise CollectError(f"{python} took over 300 s to import torch", stage="environment") from None
    try:
        info = json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise CollectError(f"{python} could not run the environment probe: {res.stderr.strip()[-300:]}",
                           stage="environment") from None
    if "error" in info:
        raise CollectError(f"torch is not importable by {python} ({info['error']}): install it, e.g. "
                           "pip install 'traceql[collect]', or set python_path in global_config.json",
                           stage="environment")
    return info


def check_cuda_version(info: dict, wanted: str | None) -> None:
    """``cuda_version_check`` "12.4" accepts torch built for CUDA 12.4; "12" accepts any 12.x."""
    if not wanted:
        return
    have = info.get("cuda") or "none (a CPU build)"
    if not (have == wanted or have.startswith(wanted + ".")):
        raise CollectError(f"CUDA version mismatch: global_config.json cuda_version_check is {wanted}, "
                           f"but torch {info['torch']} is built for CUDA {have}", stage="environment")
