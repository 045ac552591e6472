"""The peak bandwidth a GPU's links give one collective: what its bus bandwidth is measured against.

nccl-tests' *bus bandwidth* is comparable to the hardware's peak of one GPU in one direction, so the peak here
is that: the GPU's NVLink (or Infinity Fabric) bandwidth out of one GPU, one way, where the part has such links
on every GPU of a board (SXM and OAM parts), else its PCIe slot's. From the vendors' data sheets: NVLink 5
(B200, GB200) 1.8 TB/s both ways, NVLink 4 (H100 and H200 SXM) 900 GB/s, NVLink 3 (A100 SXM) 600 GB/s, NVLink 2
(V100 SXM2) 300 GB/s; H100 NVL's bridge 600 GB/s; MI300X's seven Infinity Fabric links 128 GB/s each; PCIe 5.0
x16 128 GB/s, 4.0 x16 64 GB/s, 3.0 x16 32 GB/s (both ways). A name none of these matches has no peak: its
collectives' bandwidth is given without a share of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    """A GPU's interconnect and its peak one way, in GB/s (10^9 bytes a second)."""

    name: str
    peak_gbps: float


# (pattern on the GPU's name, case-insensitive; the link), first match wins: the PCIe and NVL parts of a GPU
# before its SXM part, whose names carry no form factor ("NVIDIA H100 80GB HBM3")
_LINKS: list[tuple[str, Link]] = [
    (r"\bH100\b.*\bPCIe\b", Link("PCIe 5.0 x16", 64.0)),
    (r"\bH100\b.*\bNVL\b", Link("NVLink bridge (H100 NVL)", 300.0)),
    (r"\bH(100|200|20)\b", Link("NVLink 4", 450.0)),
    (r"\bGH200\b", Link("NVLink 4", 450.0)),
    (r"\bG?B(200|300)\b", Link("NVLink 5", 900.0)),
    (r"\bA100\b.*\bPCIe\b", Link("PCIe 4.0 x16", 32.0)),
    (r"\bA100\b", Link("NVLink 3", 300.0)),
    (r"\bV100\b.*\bPCIe\b", Link("PCIe 3.0 x16", 16.0)),
    (r"\bV100\b", Link("NVLink 2", 150.0)),
    (r"\bMI3[02]\dX?\b", Link("Infinity Fabric (7 links)", 448.0)),
    (r"\b(L40S?|L4|A10G?|A40|RTX)\b", Link("PCIe 4.0 x16", 32.0)),
]


def link(gpu_name: str | None) -> Link | None:
    """The link of the GPU named ``gpu_name`` (as CUDA or ROCm names it), None when unknown."""
    if not gpu_name:
        return None
    return next((lk for pattern, lk in _LINKS if re.search(pattern, gpu_name, re.IGNORECASE)), None)
