"""What the what-if's answers measured against real runs of their counterfactuals (the ground-truth matrix,
``docs/validation.md``): the class of a run, the worst error its class earned (what its intervals are made
of, ``verdicts.intervals``), and one sentence a verdict carries; a run of a class nothing validated gets none.

The figures are ``measured.json`` beside this module, written by ``bench/validate.py --write`` from the matrix
(the validation room sits above the commands; this file is how its result reaches them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from traceql.analyzers.step_breakdown import LAUNCH_BOUND_IDLE

FIGURES = Path(__file__).with_name("measured.json")
VALIDATED = {"AllReduce", "Broadcast"}  # the collectives of the measured runs: DDP's gradients and buffers
PROFILERS = ("nsys",)  # what every validated run was traced with
IDLE_SHARE = LAUNCH_BOUND_IDLE  # a run whose GPUs sat idle more than this share of its steps is launch-bound


@cache
def figures() -> dict[str, Any] | None:
    try:
        return json.loads(FIGURES.read_text())
    except (OSError, ValueError):
        return None


def class_key(gpu_kind: str, idle: float | None) -> str:
    """A class of run as the figures key it: its GPU kind (``h100``) and whether its GPUs sat idle more than
    :data:`IDLE_SHARE` of its steps (``launch-bound``) or not (``GPU-bound``)."""
    return f"{gpu_kind.lower()} {'launch-bound' if idle is not None and idle > IDLE_SHARE else 'GPU-bound'}"


@dataclass(frozen=True)
class RunClass:
    """What a run is, as the validation sorts runs (``name``, for a person), and the worst errors its class
    earned on the validated configurations (``figures``: ``serialized``, ``straggler``, ``cap`` relative to the
    step, ``saving_ms``; None where no configuration of its class was validated, ``why`` says why)."""

    name: str
    figures: dict[str, Any] | None
    why: str = ""

    def error(self, figure: str) -> float | None:
        """The worst relative error of ``figure`` (``serialized``, ``straggler``, ``cap``) on this class, None
        where it was never validated."""
        value = (self.figures or {}).get(figure)
        return None if value is None else float(value)


def profiler_of(paths: list[str]) -> str:
    """What a run's trace files were made by, by their names: ``nsys`` (SQLite exports), ``torch.profiler``
    (JSON), ``ncu`` (CSV), or ``several`` where they differ."""
    made = {"nsys" if p.endswith(".sqlite") else "torch.profiler" if p.endswith((".json", ".json.gz")) else "ncu"
            for p in paths}
    return made.pop() if len(made) == 1 else "several"


def classify(gpus: list[str | None], idle: float | None, collectives: set[str], world: int | None = None,
             profiler: str | None = None) -> RunClass:
    """The class of a run (``gpus``: the names of the GPUs its kernels ran on; ``idle``: the median share of a
    step they sat idle; ``collectives``: its communication kernels' operations; ``world``: its ranks in the
    trace; ``profiler``: :func:`profiler_of` its files) and its class's figures: none where the validated runs
    were unlike it in any of these."""
    bound = "launch-bound" if idle is not None and idle > IDLE_SHARE else "GPU-bound"
    named = sorted({g for g in gpus if g})
    f = figures()
    kinds = [k for k in (f or {}).get("gpus", []) if named and all(k.lower() in g.lower() for g in named)]
    gpu = kinds[0].upper() if kinds else (", ".join(named) or "unnamed GPUs")
    name = f"{gpu}, {bound}: GPUs idle {idle:.0%} of a step" if idle is not None else gpu
    if f is None or "classes" not in f:
        return RunClass(name, None, "no validation figures are installed")
    other = sorted(c for c in collectives if c not in VALIDATED)
    if other:
        return RunClass(name, None, f"its {', '.join(other)} were never validated (DDP's all-reduces were)")
    if not kinds:
        return RunClass(name, None, "no run on its GPUs was validated" if named else "its trace names no GPU")
    found = f["classes"].get(class_key(kinds[0], idle))
    if found is None:
        return RunClass(name, None, "no configuration of its class was validated")
    if profiler is not None and profiler not in f.get("profilers", PROFILERS):
        return RunClass(name, None, f"it was traced with {profiler}, the validated runs with "
                                    f"{' and '.join(f.get('profilers', PROFILERS))}")
    worlds = found.get("worlds") or []
    if world is not None and worlds and world not in worlds:
        said = " and ".join(map(str, worlds))
        return RunClass(name, None, f"{'one rank' if world == 1 else f'{world} ranks'} in its trace, "
                                    f"the validated runs of its class had {said}")
    return RunClass(name, found)


def _families(found: dict[str, Any]) -> str:
    fam = list(found["families"])
    return ", ".join(fam[:-1]) + f" and {fam[-1]}" if len(fam) > 1 else fam[0]


def sentence(cls: RunClass, cap: bool = False) -> str | None:
    """What a run's intervals are made of, or why it has none (``cap``: a verdict on another bucket cap too)."""
    f = figures()
    if f is None:
        return None
    if cls.figures is None:
        seen = ", ".join(f"{k.split()[0].upper()} {k.split()[1]}" for k in f.get("classes", {}))
        return (f"This run ({cls.name}): {cls.why}, so its figures carry no interval (the what-if was validated "
                f"on {f['runs']} runs: {seen}).")
    c = cls.figures
    parts = [f"serialized ±{c['serialized']:.1%} of the step", f"overlap saving ±{c['saving_ms']:.2f} ms"]
    unchecked = []
    for key, what in (("straggler", "without the straggler"), ("cap", "another bucket cap")):
        if key == "cap" and not cap:
            continue
        if c.get(key) is None:
            unchecked.append(what)
        else:
            parts.append(f"{what} ±{c[key]:.1%}")
    text = (f"This run ({cls.name}): its intervals hold its steps' spread and the worst error on the "
            f"{c['configurations']} validated configurations of its class ({_families(c)}): {'; '.join(parts)}")
    if unchecked:
        text += f"; {' and '.join(unchecked)} never validated on such runs (no interval)"
    return text + "."


def summarise(res: dict[str, Any]) -> dict[str, Any]:
    """The figures :func:`classify` and :func:`sentence` read, from ``traceql.validation.report.results``: the
    runs, the GPU kinds, and per class its worst errors (``traceql.validation.classes``) and how many of its
    configurations an interval learned without their family held (``covered``)."""
    classes = {k: {**{f: v for f, v in c.items() if f != "held_out"},
                   "covered": [sum(h["covered"] for h in c["held_out"]), len(c["held_out"])]}
               for k, c in (res.get("classes") or {}).items()}
    library = sum(r.get("stock", 0) + r.get("serial", 0) for r in res.get("library") or [])
    return {"runs": res["runs"] + library + sum(r.get("runs", 0) for r in res.get("alternating") or []),
            "gpus": sorted({k.split()[0] for k in classes} | set(res["gpus"])), "profilers": list(PROFILERS),
            "classes": classes}
