"""Score single-trace detection against paired (isolated-baseline) labels on the h200-ddp pairs.

    python bench/detector_f1.py [--corpus ../shared/datasets/h200-ddp/nsys]

Prints, per pair, the paired cases and the detector's precision / recall / F1, with and without the
IsolationForest gate, and the ratio-threshold sweep that chose the default.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.ensemble import IsolationForest

from analyzers.detection.detector import SlowdownDetector
from analyzers.detection.features import FEATURES, feature_table
from analyzers.overlap import comm_overlap
from traceql.commands.detect import detect
from traceql.model.names import with_signature
from traceql.trace import read_trace

PAIRS = [("toy", "cap25"), ("toy", "cap2"), ("gpt2", "cap25"), ("gpt2", "cap2")]


def prf(pred: pl.Series, truth: pl.Series) -> tuple[float, float, float]:
    tp = int((pred & truth).sum())
    fp = int((pred & ~truth).sum())
    fn = int((~pred & truth).sum())
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def forest_alone_best_f1(trace: Path, truth: pl.Series) -> float:
    """An IsolationForest on the features alone, overlapped kernels cut at the best possible score."""
    with read_trace(trace) as t:
        feats = feature_table(comm_overlap(with_signature(t.kernels)))
    X = feats.select(FEATURES).to_numpy()
    score = -IsolationForest(n_estimators=200, random_state=0).fit(X).score_samples(X)
    overlapped = feats["comm_overlap_ns"].to_numpy() > 0
    cuts = np.quantile(score, np.linspace(0.5, 0.995, 100))
    return max(prf(pl.Series(overlapped & (score > c)), truth)[2] for c in cuts)


def main() -> None:
    ap = argparse.ArgumentParser()
    corpus = Path(__file__).resolve().parents[2] / "shared/datasets/h200-ddp/nsys"
    ap.add_argument("--corpus", type=Path, default=corpus)
    args = ap.parse_args()
    print(f"{'pair':<16}{'cases':>7}{'detector':>9}{'P':>7}{'R':>7}{'F1':>7}   {'no-gate F1':>10}   "
          "threshold sweep F1 @1.1/1.15/1.2/1.25/1.3   forest-alone best F1")
    for model, cap in PAIRS:
        trace = args.corpus / f"{model}_ddp2_{cap}.sqlite"
        iso = args.corpus / f"{model}_single.sqlite"
        t0 = time.perf_counter()
        paired = detect(trace, baseline=[iso]).kernels
        single = detect(trace).kernels
        elapsed = time.perf_counter() - t0
        truth = paired["is_slowdown"]
        p, r, f = prf(single["is_slowdown"], truth)
        nogate = detect(trace, detector=SlowdownDetector(normal_quantile=1.0)).kernels["is_slowdown"]
        sweep = [prf(detect(trace, threshold=t).kernels["is_slowdown"], truth)[2] for t in (1.1, 1.15, 1.2, 1.25, 1.3)]
        print(f"{model + '_' + cap:<16}{int(truth.sum()):>7}{int(single['is_slowdown'].sum()):>9}"
              f"{p:>7.3f}{r:>7.3f}{f:>7.3f}   {prf(nogate, truth)[2]:>10.3f}   "
              + " ".join(f"{s:.3f}" for s in sweep) + f"   {forest_alone_best_f1(trace, truth):.3f}"
              + f"   ({elapsed:.1f}s for both runs)")


if __name__ == "__main__":
    main()
