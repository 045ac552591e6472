"""What limits single-trace labels: their errors by reference kind, and the F1 and precision they would reach
were some kinds' references perfect.

    python bench/label_limits.py [--root datasets/groundtruth] [--library datasets/library]
                                 [--families datasets/families]

Every stock run with twin cases (the runs ``bench/validate.py`` scores) is labelled as ``detect --single-trace``
labels it by default, and scored against its twin labels. Then the labels of the kernels whose reference is of
some kinds are replaced by the truth (an *oracle* for those kinds: their references as good as the twin's), the
rest kept: what a perfect estimate of those kinds could give at most. Each line is printed on every judged
kernel and on the kernels far from the threshold (their true ratio more than 3 % from it: ``scoring.NEAR``),
where a reference off by a percent cannot flip the label. Then the false cases per reference kind: how many lie
within 3 % of the threshold, how many are under 1.1x their twin, and how low their estimate is against the twin.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import polars as pl

from traceql.analyzers.baselines.kinds import BORROWED, CLEAN, CONTAMINATED, CORRECTED
from traceql.analyzers.detection.threshold import PAIRED_FACTOR
from traceql.validation import held_out, load_matrix, scoring
from traceql.validation.families import cases

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = (PAIRED_FACTOR, 0.05, 0.0)  # band, contamination, margin: `detect --single-trace` as shipped
ORACLES = {"as labelled": (), "borrowed perfect": (BORROWED,),
           "every estimate perfect": (BORROWED, CORRECTED, CONTAMINATED),
           "clean perfect": (CLEAN,)}


def joined(case: held_out.Case) -> pl.DataFrame:
    """The judged kernels of ``case``: truth, label, reference kind, estimate and the true ratio."""
    labelled = held_out.labels(case, DEFAULT, None)
    t = case.truth
    return t.filter(scoring.judged(t)).select(
        *scoring.KEY, pl.col("is_slowdown").alias("gt"), pl.col("baseline_ns").alias("twin_ns"),
        (pl.col("duration_ns") / pl.col("baseline_ns")).alias("true_ratio")).join(
        labelled.select(*scoring.KEY, pl.col("is_slowdown").fill_null(False).alias("pred"), "reference_kind",
                        pl.col("baseline_ns").alias("estimate_ns")), on=scoring.KEY, how="left").with_columns(
        pl.col("pred").fill_null(False), pl.lit(case.run.label).alias("run"))


def prf(frame: pl.DataFrame, pred: pl.Expr) -> tuple[float, float, float]:
    f = frame.select((pred & pl.col("gt")).sum().alias("tp"), (pred & ~pl.col("gt")).sum().alias("fp"),
                     (~pred & pl.col("gt")).sum().alias("fn")).row(0)
    tp, fp, fn = f
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    return p, r, 2 * p * r / (p + r) if p + r else 0.0


def summary(runs: list[pl.DataFrame], kinds: tuple[str, ...], far: bool) -> str:
    pred = pl.when(pl.col("reference_kind").is_in(list(kinds))).then(pl.col("gt")).otherwise(pl.col("pred"))
    near = ((pl.col("true_ratio") / PAIRED_FACTOR - 1).abs() > scoring.NEAR).fill_null(True)
    scores = [prf(r.filter(near) if far else r, pred) for r in runs]
    f1s, ps = [s[2] for s in scores], [s[0] for s in scores]
    low = sum(p < 0.93 for p in ps)
    return (f"{statistics.mean(f1s):6.3f} {min(f1s):6.3f} {statistics.median(ps):6.3f} {min(ps):6.3f}"
            f" {low:5d}/{len(ps)}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--library", type=Path, default=ROOT / "datasets" / "library")
    ap.add_argument("--families", type=Path, default=ROOT / "datasets" / "families")
    args = ap.parse_args()
    t0 = time.perf_counter()
    matrices = [load_matrix(args.root), *(load_matrix(p) for p in (args.library, args.families) if p.is_dir())]
    every = cases(matrices, lambda text: print(f"{time.perf_counter() - t0:6.1f} s  {text}", file=sys.stderr,
                                                flush=True))
    runs = [joined(c) for c in every]
    runs = [r for r in runs if r["gt"].any()]
    print(f"{len(runs)} stock runs with twin cases, labelled as `detect --single-trace` does\n")
    print(f"{'references':24s} {'kernels':7s} {'F1':>6s} {'worst':>6s} {'P med':>6s} {'P min':>6s} {'P<.93':>9s}")
    for name, kinds in ORACLES.items():
        for far in (False, True):
            print(f"{name:24s} {'far' if far else 'all':7s} {summary(runs, kinds, far)}")
    every_row = pl.concat(runs, how="vertical_relaxed")
    false = every_row.filter(pl.col("pred") & ~pl.col("gt"))
    print("\nfalse cases    count  near  <1.1x  estimate/twin (median)")
    for kind, part in sorted(false.group_by("reference_kind"), key=lambda kv: -kv[1].height):
        near = part.filter(pl.col("true_ratio") >= PAIRED_FACTOR * (1 - scoring.NEAR)).height
        under = part.filter(pl.col("true_ratio") < 1.1).height
        ratio = (part["estimate_ns"] / part["twin_ns"]).median()
        print(f"{kind[0]!s:13s} {part.height:6d} {near:5d} {under:6d}  {ratio:.3f}")
    print(f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
