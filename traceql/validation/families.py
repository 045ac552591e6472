"""Single-trace labels scored with a whole model family held out (``results``' ``labels``).

Every stock run with an isolated twin, of the matrix and of the library models (their twins on H100 and H200),
is scored against its twin labels. For each family, nothing its runs are labelled with saw them: the detector's
setting (band, contamination, margin) is the one with the best mean F1, without factors, over the other families'
runs, and the estimates' factors are learned from the other families alone (from their runs on the GPU kinds
factors are learned on and applied to, ``baselines.learned.GPU_KINDS``; the other runs keep their estimates).
Each run is scored three ways: with the kinds of factors `detect` ships (``baselines.learned.SCALED``), without
factors, and with factors for every kind of estimate (what once shipped); the shipped kinds are those that cost
no family F1 here.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import polars as pl

from traceql.analyzers.baselines.learned import ESTIMATED, GPU_KINDS, empty, learn
from traceql.validation import held_out, scoring
from traceql.validation.held_out import Case, Setting
from traceql.validation.matrix import Matrix

WAYS = ("shipped", "without", "every_kind")  # the factors a run is scored with: SCALED kinds, none, every kind


def cases(matrices: list[Matrix], progress: Callable[[str], None]) -> list[Case]:
    """Every stock run with a twin in ``matrices``, read once, with its twin labels (shipped, else made)."""
    out = []
    stock = [(m, cfg, run) for m in matrices for cfg in m.configurations() if cfg.twin is not None
             for run in cfg.stock]
    for i, (m, cfg, run) in enumerate(stock, 1):
        progress(f"labels, read {i}/{len(stock)}: {run.label}")
        path = m.labels_path(run)
        truth = pl.read_parquet(path) if path.is_file() else scoring.twin_labels(run, cfg.twin)
        out.append(held_out.prepare(run, truth))
    return out


def _counts(s: scoring.Score) -> list[int]:
    return [s.truth, s.cases, s.tp]


def rows(matrices: list[Matrix], settings: list[Setting], progress: Callable[[str], None],
         ) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]], list[str]]:
    """Per stock run with twin cases, its labels scored with its family held out; the factors learned from
    every family (``all``: what ``detect`` ships) and without each; each setting's mean F1 over every run
    (without factors); and the runs whose twins found no case (nothing to score)."""
    every = cases(matrices, progress)
    scored = [c for c in every if scoring.judged(c.truth).any() and c.truth.filter(scoring.judged(c.truth))
              ["is_slowdown"].fill_null(False).any()]
    grid: dict[tuple[int, Setting], float] = {}
    for i, c in enumerate(scored):
        progress(f"labels, settings {i + 1}/{len(scored)}: {c.run.label}")
        for s in settings:
            grid[(i, s)] = scoring.score(held_out.labels(c, s, empty()), c.truth).f1
    estimates = pl.concat([held_out.estimate_rows(c) for c in scored if c.kind in GPU_KINDS])
    families = sorted({c.family for c in scored})
    factors = {f: learn(estimates.filter(pl.col("model") != f)) for f in families}
    out = []
    for f in families:
        others = [i for i, c in enumerate(scored) if c.family != f]
        best = max(settings, key=lambda s: (statistics.mean(grid[(i, s)] for i in others), -s[0]))
        tables = {"shipped": factors[f], "without": empty(),
                  "every_kind": learn(estimates.filter(pl.col("model") != f), kinds=ESTIMATED)}
        for c in (c for c in scored if c.family == f):
            progress(f"labels, {f} held out: {c.run.label}")
            # as `detect` does: factors only for runs on the GPU kinds they are learned on
            out.append(_row(c, best, tables if c.kind in GPU_KINDS else dict.fromkeys(tables, empty())))
    means = [{"band": s[0], "contamination": s[1], "margin": s[2],
              "f1": statistics.mean(grid[(i, s)] for i in range(len(scored)))} for s in settings]
    tables_out = {"all": learn(estimates).rows(), **{f: t.rows() for f, t in factors.items()}}
    return out, tables_out, means, [c.run.label for c in every if all(c is not s for s in scored)]


def _row(c: Case, setting: Setting, tables: dict[str, pl.DataFrame]) -> dict[str, Any]:
    run = c.run
    row: dict[str, Any] = {"run": run.label, "gpu": run.gpu, "kind": run.kind, "model": run.model,
                           "family": c.family, "world": run.world, "cap": run.cap, "band": setting[0],
                           "contamination": setting[1], "margin": setting[2], "factors": tables["shipped"].height}
    for way in WAYS:
        labelled = held_out.labels(c, setting, tables[way])
        sc = scoring.score(labelled, c.truth)
        if way == "shipped":
            row.update({k: v for k, v in asdict(sc).items() if k in ("truth", "cases", "precision", "recall", "f1",
                                                                     "f1_far")}, lost_ratio=sc.lost_ratio)
            row.update(zip(("f1_decided", "precision_decided", "decided"), scoring.on_decided(labelled, c.truth),
                           strict=True))
        else:
            row.update({f"f1_{way}": sc.f1, f"precision_{way}": sc.precision})
        if way != "every_kind":
            row[f"kinds_{way}"] = {k: _counts(s) for k, s in held_out.by_kind(labelled, c.truth).items()}
    inrun = scoring.inrun_labels(run)
    row["inrun_f1"] = None if inrun is None else scoring.score(inrun, c.truth).f1
    return row
