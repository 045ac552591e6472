"""The NVLinks a collection records of its first GPU (``nvidia-smi nvlink -s``), for the collectives' peak.
nvidia-smi does not run on this machine: a stand-in prints what it printed on a 2 x H100 host (NV18)."""

from __future__ import annotations

import stat
from pathlib import Path

from traceql.collectors.probe import interconnect

H100 = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-2fd8a4c0)\n" + "".join(
    f"\t Link {i}: 26.562 GB/s\n" for i in range(18))
PCIE_ONLY = "GPU 0: NVIDIA L40S (UUID: GPU-1)\n"


def stand_in(tmp: Path, text: str, code: int = 0) -> dict[str, str]:
    (tmp / "out.txt").write_text(text)
    smi = tmp / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\necho "$@" > "{tmp}/args.txt"\ncat "{tmp}/out.txt"\nexit {code}\n')
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    return {"PATH": str(tmp), "CUDA_VISIBLE_DEVICES": "2,3"}


def test_an_nvlink_gpu_records_its_links(tmp_path: Path) -> None:
    found = interconnect(stand_in(tmp_path, H100))
    assert found == {"nvlink_links": 18, "nvlink_link_gbps": 26.562, "nvlink_gbps": 478.116,
                     "from": "nvidia-smi nvlink -s"}
    assert (tmp_path / "args.txt").read_text().split() == ["nvlink", "-s", "-i", "2"]  # the run's first GPU


def test_no_nvlink_no_nvidia_smi_or_a_failure_records_nothing(tmp_path: Path) -> None:
    assert interconnect(stand_in(tmp_path, PCIE_ONLY)) is None
    assert interconnect(stand_in(tmp_path, H100, code=9)) is None
    assert interconnect({"PATH": str(tmp_path / "nowhere")}) is None
