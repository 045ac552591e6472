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
CPU_BOUND = {"resnet50b32"}  # the matrix's CPU-bound configurations (their GPUs idle a third of the step)
IDLE_SHARE = 0.2  # a run whose GPUs sat idle more than this share of its steps is CPU-bound


@cache
def figures() -> dict[str, Any] | None:
    try:
        return json.loads(FIGURES.read_text())
    except (OSError, ValueError):
        return None


def _pct(pair: list[float]) -> str:
    return f"median {pair[0]:+.1%}, worst {pair[1]:+.1%}"


def sentence(collectives: set[str], idle: float | None = None, cap: bool = False) -> str | None:
    """How far the what-if's answers were off on the matrix, and whether this run's collectives were among
    those measured (``collectives``: its communication kernels' operations, e.g. ``AllReduce``), and whether
    its steps were CPU-bound (``idle``: the median share of a step its GPUs sat idle); with ``cap``, how far
    another bucket cap was off too."""
    f = figures()
    if f is None:
        return None
    text = (f"measured on {f['runs']} runs ({', '.join(g.upper() for g in f['gpus'])}, DDP; GPU-bound): serialized "
            f"{_pct(f['serialized_error'])}; overlap saving predicted - real median "
            f"{f['saving_gap_ms'][0]:+.2f} ms, worst {f['saving_gap_ms'][1]:+.2f} ms; without the straggler "
            f"{_pct(f['straggler_error'])}")
    if cap and f.get("cap_error"):
        caps = f["caps"]
        listed = ", ".join(caps[:-1]) + f" and {caps[-1]}" if len(caps) > 1 else caps[0]
        text += f"; another bucket cap (of {listed} MB) {_pct(f['cap_error'])}"
    other = sorted(c for c in collectives if c not in VALIDATED)
    if other:
        text += f"; this run's {', '.join(other)} lie outside them (DDP all-reduces only)"
    if idle is not None and idle > IDLE_SHARE and f.get("cpu_bound_saving_gap_ms"):
        text += (f"; this run's GPUs sat idle {idle:.0%} of its steps (CPU-bound), where the overlap saving was "
                 f"off by up to {f['cpu_bound_saving_gap_ms'][1]:+.2f} ms and serialized by "
                 f"{f['cpu_bound_serialized_error'][1]:+.1%}")
    return text


def errors(collectives: set[str], idle: float | None = None) -> dict[str, str]:
    """What each verdict line of a run like this one says of its own error (its collectives' operations, the
    median share of a step its GPUs sat idle): ``overlap`` (ms), ``straggler`` and ``cap`` (% of the step),
    the median absolute error on the matrix's runs like it; "unvalidated: not DDP" where its collectives were
    never measured. Empty without the packaged figures."""
    f = figures()
    if f is None or "saving_abs_ms" not in f:
        return {}
    if set(collectives) - VALIDATED:
        return {k: "unvalidated: not DDP" for k in ("overlap", "straggler", "cap")}
    cpu = idle is not None and idle > IDLE_SHARE and "cpu_bound_saving_abs_ms" in f
    out = {"overlap": f"±{f['cpu_bound_saving_abs_ms' if cpu else 'saving_abs_ms']:.1f} ms on validation runs",
           "straggler": f"±{f['straggler_abs']:.1%} of a step"}
    if "cap_abs" in f:
        out["cap"] = f"±{f['cap_abs']:.1%}"
    return out


def summarise(res: dict[str, Any]) -> dict[str, Any]:
    """The figures ``sentence`` reads, from ``traceql.validation.report.results``."""
    def spread(values: list[float]) -> list[float]:
        return [statistics.median(values), max(values, key=abs)]

    every = res.get("pooled") or res["serialized"]  # per configuration over its GPU kind's hosts, where known
    ser = [r for r in every if r["model"] not in CPU_BOUND]
    cpu = [r for r in every if r["model"] in CPU_BOUND]
    strag = [r["error"] for r in res["injected"] if r["way"] == "without straggler"]
    gaps = [r["saves_predicted_ms"] - r["saves_real_ms"] for r in ser]
    out = {"runs": res["runs"], "gpus": res["gpus"], "serialized_error": spread([r["error"] for r in ser]),
           "saving_gap_ms": spread(gaps), "saving_abs_ms": statistics.median(abs(g) for g in gaps),
           "straggler_error": spread(strag), "straggler_abs": statistics.median(abs(e) for e in strag)}
    if res.get("caps"):
        out["cap_error"] = spread([r["error"] for r in res["caps"]])
        out["cap_abs"] = statistics.median(abs(r["error"]) for r in res["caps"])
        out["caps"] = [str(c) for c in sorted({r["cap"] for r in res["caps"]})]
    if cpu:
        out["cpu_bound_serialized_error"] = spread([r["error"] for r in cpu])
        out["cpu_bound_saving_gap_ms"] = spread([r["saves_predicted_ms"] - r["saves_real_ms"] for r in cpu])
        out["cpu_bound_saving_abs_ms"] = statistics.median(abs(r["saves_predicted_ms"] - r["saves_real_ms"])
                                                           for r in cpu)
    return out
