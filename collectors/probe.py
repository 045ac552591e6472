"""What the training Python can do: torch, CUDA and NCCL versions, GPUs — asked before launching anything."""

from __future__ import annotations

import json
import re
import shutil
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
    if info.get("gpus"):
        info["interconnect"] = interconnect(env)
    return info


LINK = re.compile(r"^\s*Link (\d+): ([0-9.]+) GB/s\s*$", re.MULTILINE)


def interconnect(env: dict[str, str]) -> dict | None:
    """The NVLinks of the first GPU the run uses, as ``nvidia-smi nvlink -s`` reports them: how many are up and
    each one's speed (GB/s, one way), and their sum (``nvlink_gbps``); None where nvidia-smi is absent, fails or
    reports no active link (a PCIe-only GPU)."""
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    first = (env.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
    if smi is None:
        return None
    try:
        res = subprocess.run([smi, "nvlink", "-s", "-i", first], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    speeds = [float(speed) for _, speed in LINK.findall(res.stdout)] if res.returncode == 0 else []
    if not speeds:
        return None
    return {"nvlink_links": len(speeds), "nvlink_link_gbps": max(speeds), "nvlink_gbps": round(sum(speeds), 3),
            "from": "nvidia-smi nvlink -s"}


def check_cuda_version(info: dict, wanted: str | None) -> None:
    """``cuda_version_check`` "12.4" accepts torch built for CUDA 12.4; "12" accepts any 12.x."""
    if not wanted:
        return
    have = info.get("cuda") or "none (a CPU build)"
    if not (have == wanted or have.startswith(wanted + ".")):
        raise CollectError(f"CUDA version mismatch: global_config.json cuda_version_check is {wanted}, "
                           f"but torch {info['torch']} is built for CUDA {have}", stage="environment")
