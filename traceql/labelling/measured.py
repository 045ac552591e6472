"""What the what-if's answers measured against real runs of their counterfactuals (the ground-truth matrix,
``docs/validation.md``): one sentence a verdict carries, and where a run lies outside what was measured.

The figures are ``measured.json`` beside this module, written by ``bench/validate.py --write`` from the matrix
(the validation room sits above the commands; this file is how its result reaches them).
"""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path
from typing import Any

FIGURES = Path(__file__).with_name("measured.json")
VALIDATED = {"AllReduce", "Broadcast"}  # the collectives of the measured runs: DDP's gradients and buffers


@cache
def figures() -> dict[str, Any] | None:
    try:
        return json.loads(FIGURES.read_text())
    except (OSError, ValueError):
        return None


def _pct(pair: list[float]) -> str:
    return f"median {pair[0]:+.1%}, worst {pair[1]:+.1%}"


def sentence(collectives: set[str]) -> str | None:
    """How far the what-if's answers were off on the matrix, and whether this run's collectives were among
    those measured (``collectives``: its communication kernels' operations, e.g. ``AllReduce``)."""
    f = figures()
    if f is None:
        return None
    text = (f"measured on {f['runs']} runs ({', '.join(g.upper() for g in f['gpus'])}, DDP): serialized "
            f"{_pct(f['serialized_error'])}; overlap saving predicted - real median "
            f"{f['saving_gap_ms'][0]:+.2f} ms, worst {f['saving_gap_ms'][1]:+.2f} ms; without the straggler "
            f"{_pct(f['straggler_error'])}")
    other = sorted(c for c in collectives if c not in VALIDATED)
    if other:
        text += f"; this run's {', '.join(other)} lie outside them (DDP all-reduces only)"
    return text


def summarise(res: dict[str, Any]) -> dict[str, Any]:
    """The figures ``sentence`` reads, from ``traceql.validation.report.results``."""
    def spread(values: list[float]) -> list[float]:
        return [statistics.median(values), max(values, key=abs)]

    ser = res["serialized"]
    strag = [r["error"] for r in res["injected"] if r["way"] == "without straggler"]
    return {"runs": res["runs"], "gpus": res["gpus"], "serialized_error": spread([r["error"] for r in ser]),
            "saving_gap_ms": spread([r["saves_predicted_ms"] - r["saves_real_ms"] for r in ser]),
            "straggler_error": spread(strag)}
