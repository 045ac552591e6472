"""A long run's causes priced from a sample of its steps: every window of steps (``windows.plan``) that holds a
named straggler's step is replayed (and the run's first and last), and of the others a simple random sample,
drawn the same for the same run (seeded by its id; not every k-th, which a training loop's own period, say
a checkpoint every N steps, would alias), about :data:`SAMPLED` steps in all. Runs of at most
:data:`SAMPLE_ABOVE` normal steps are replayed whole, and so is a run whose stragglers' windows would make the
sample more than :data:`WORTH` of its steps (small windows cost more a step than the large ones of a whole
replay).

Each replayed step carries a weight: 1 in a straggler's window, the other windows' steps over the sampled ones'
steps elsewhere; a cause's cost a step is then the weighted sum of its cost over the weighted steps (exact for
a straggler's own cost: its steps are all replayed). Its error (:func:`errors`) is the ratio estimator's over
the sampled windows (each window a cluster of steps), at 95 %, with the finite-population correction.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
from collections.abc import Collection, Sequence
from typing import Any

import polars as pl

SAMPLE_ABOVE = 500  # normal steps a run has beyond which its causes are priced from a sample ...
SAMPLED = 200  # ... of about this many steps (with every straggler's)
WORTH = 0.5  # a sample of more than this share of the steps (stragglers in most windows) is no sample: all are
SAMPLE_ENV = "TRACEQL_SAMPLE_ABOVE"  # a smaller bound (tests: the shipped runs sampled)
Z95 = 1.96
WINDOW, WEIGHT = "_window", "_weight"


def sample_above() -> int:
    text = os.environ.get(SAMPLE_ENV, "").strip()
    return int(text) if text.isdigit() else SAMPLE_ABOVE


def choose(cut: Sequence[Any], steps: dict[tuple[str, int], int], held: Collection[tuple[str, int]],
           above: int = SAMPLE_ABOVE, sampled: int = SAMPLED) -> dict[int, float]:
    """Of the windows ``cut`` (``windows.Window``, which imports this module; ``steps``: the normal steps of
    each window, by its run and first step), those to
    replay and the weight of their steps: all, weight 1, where a run has at most ``above`` normal steps, and
    the windows of its first and last steps and of a step of ``held`` (run, step); of the rest of a run, a random
    sample of about ``sampled`` steps (two windows at least). Keys: indices in ``cut``."""
    out: dict[int, float] = {}
    by_run: dict[str, list[int]] = {}
    for i, w in enumerate(cut):
        by_run.setdefault(w.run_id, []).append(i)
    for run_id, mine in by_run.items():
        total = sum(steps[(run_id, cut[i].first)] for i in mine)
        sure = [i for i in mine if total <= above or cut[i].opens or cut[i].closes
                or any((run_id, s) in held for s in range(cut[i].first, cut[i].last + 1))]
        rest = [i for i in mine if i not in sure]
        out.update({i: 1.0 for i in sure})
        if not rest:
            continue
        per = total / len(mine)
        want = min(len(rest), max(2, round(sampled / per)))
        seed = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "little")  # the same run, the same draw
        picked = sorted(random.Random(seed).sample(rest, want))
        weight = sum(steps[(run_id, cut[i].first)] for i in rest) / sum(steps[(run_id, cut[i].first)] for i in picked)
        out.update({i: weight for i in picked})
    return out


def errors(part: pl.DataFrame, cost: pl.Series) -> float | None:
    """The 95 % error of a cause's estimated cost a step (``cost`` per step of ``part``, one run's replayed
    steps with their :data:`WINDOW` and :data:`WEIGHT`); None where nothing was sampled (every step replayed)."""
    if WEIGHT not in part.columns or (part[WEIGHT] == 1.0).all():
        return None
    frame = part.select(WINDOW, WEIGHT).with_columns(cost.alias("_cost"))
    rest = frame.filter(pl.col(WEIGHT) != 1.0)
    weight = float(rest[WEIGHT][0])
    clusters = rest.group_by(WINDOW).agg(pl.col("_cost").sum().alias("t"), pl.len().alias("m"))
    n = clusters.height
    if n < 2:
        return None
    t, m = clusters["t"].cast(pl.Float64), clusters["m"].cast(pl.Float64)
    ratio = float(t.sum()) / float(m.sum())
    spread = float(((t - ratio * m) ** 2).sum()) / (n - 1)
    sampled_steps, total = float(m.sum()), float(frame[WEIGHT].sum())
    # one window in about ``weight`` of the rest was replayed: the finite-population correction (a simple random
    # sample of the rest's windows, each a cluster of steps: the ratio estimator's variance)
    var_ratio = (1 - 1 / weight) * spread / (n * (sampled_steps / n) ** 2)
    rest_steps = sampled_steps * weight
    return Z95 * (rest_steps / total) * math.sqrt(max(var_ratio, 0.0))
