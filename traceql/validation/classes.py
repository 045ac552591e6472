"""The error each class of run earned: the what-if's worst error on the validated configurations of a class
(GPU kind, and GPU-bound or launch-bound by the share of a step its GPUs sat idle), and whether an interval of
that width, learned without a configuration's family, held that configuration's real serialized step.

A class is what ``whatif`` prints an interval for (``traceql.verdicts.measured``); a run of a class no
configuration validated gets none, nor does one of a class of a single family (nothing to hold out). Where a
model has alternating runs on a GPU kind (``alternating``: stock and serialized steps in one process, whose
real saving is known to a ms where separate runs know it to ten), they are its configuration in the class, in
place of its separate stock and serialized runs of that kind.
"""

from __future__ import annotations

import re
from typing import Any

from traceql.validation.matrix import family
from traceql.verdicts.measured import class_key


def _rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The pooled configurations of the matrix and of the library, each with its class, the alternating runs'
    in place of the separate runs of their (GPU kind, model)."""
    paired = res.get("alternating") or []
    seen = {(r["gpu"], r["model"]) for r in paired}
    rows = [r for r in [*(res.get("pooled") or []), *(res.get("library") or [])] if (r["gpu"], r["model"]) not in seen]
    return [{**r, "class": class_key(r["gpu"], r.get("idle"))} for r in [*rows, *paired] if r.get("idle") is not None]


def world_of(row: dict[str, Any]) -> int:
    """A validated configuration's number of GPUs: its ``world``, or its name's ``<n>g`` (alternating runs')."""
    if row.get("world") is not None:
        return int(row["world"])
    found = re.search(r"\b(\d+)g\b", str(row["config"]))
    if found is None:
        raise ValueError(f"validated configuration {row['config']!r} names no number of GPUs")
    return int(found[1])


def _worst(values: list[float]) -> float | None:
    return max((abs(v) for v in values), default=None)


def results(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per class (``h100 GPU-bound`` ...): its configurations, families and numbers of GPUs (``worlds``), the
    worst serialized error (relative), overlap-saving gap (ms), straggler and bucket-cap error (relative, runs
    of its models), and
    the family held out check: per configuration, the serialized error against the worst of the other families'
    (``covered``: within it; ``width``: twice that worst, the interval's width as a share of the step)."""
    rows = _rows(res)
    model_class = {r["model"]: r["class"] for r in rows}
    out: dict[str, dict[str, Any]] = {}
    for key in sorted({r["class"] for r in rows}):
        mine = [r for r in rows if r["class"] == key]
        if len({family(r["model"]) for r in mine}) < 2:
            continue
        held = []
        for r in mine:
            e = _worst([o["error"] for o in mine if family(o["model"]) != family(r["model"])])
            held.append({"config": r["config"], "error": r["error"], "bound": e,
                         "covered": e is not None and abs(r["error"]) <= e})
        strag = [r["error"] for r in res.get("injected", [])
                 if r["way"] == "without straggler" and model_class.get(r["model"]) == key]
        cap = [r["error"] for r in res.get("caps", []) if model_class.get(r["model"]) == key]
        out[key] = {"configurations": len(mine), "families": sorted({family(r["model"]) for r in mine}),
                    "worlds": sorted({world_of(r) for r in mine}),
                    "serialized": _worst([r["error"] for r in mine]),
                    "saving_ms": _worst([r["saves_predicted_ms"] - r["saves_real_ms"] for r in mine]),
                    "straggler": _worst(strag), "cap": _worst(cap), "held_out": held}
    return out
