"""Score every label source against twin labels, and choose the detector's settings leave-one-model-out.

    python bench/detector_f1.py [--corpus ../shared/datasets/h200-ddp/nsys]

Twin labels (`detect TRACE --baseline ISOLATED`) are the truth. For each pair it prints the single-trace
detector's precision / recall / F1 (isolated steps hidden from it), the same without the forest (band =
threshold), how many labels the forest changes, the in-run labels' F1 where the run has isolated steps, and
each source's unoverlapped false-positive rate (kernels no communication touched that are labelled cases,
or that exceed 1.2x their baseline). Then, for each model held out in turn, the band and contamination
that score best on the other models, and the held-out F1 with them.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import polars as pl

from traceql.analyzers.detection.detector import SlowdownDetector
from traceql.commands.detect import detect

ROOT = Path(__file__).resolve().parents[1]
BANDS, CONTAMINATIONS = (1.05, 1.1, 1.15, 1.2), (0.02, 0.05, 0.1, 0.2)


def pairs(corpus: Path) -> list[tuple[str, str, Path, Path]]:
    """(model, name, trace, isolated run) of every pair we have."""
    out = [("toy" if m == "toy" else "gpt2", f"{m} {c}", corpus / f"{m}_ddp2_{c}.sqlite", corpus / f"{m}_single.sqlite")
           for m in ("toy", "gpt2") for c in ("cap25", "cap2")]
    ours = ROOT / "datasets"
    out += [("gpt2", "embedded gpt2", ours / "default/gpt2-nsys", ours / "default/gpt2-single-nsys"),
            ("gpt2", "in-run gpt2", ours / "inrun/gpt2-inrun-nsys", ours / "inrun/gpt2-single-nsys"),
            ("gpt2", "in-run gpt2 cap2", ours / "runs/gpt2-cap2-inrun-nsys", ours / "inrun/gpt2-single-nsys"),
            ("resnet50", "in-run resnet50", ours / "runs/resnet50-inrun-nsys", ours / "runs/resnet50-single-nsys")]
    return [p for p in out if p[2].exists()]


def prf(pred: pl.Series, truth: pl.Series) -> tuple[float, float, float]:
    tp, fp, fn = int((pred & truth).sum()), int((pred & ~truth).sum()), int((~pred & truth).sum())
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def normal(frame: pl.DataFrame) -> pl.Series:
    """The kernels of normal training steps (not the isolated steps' own)."""
    return frame["baseline_kind"] != "reference"


def unoverlapped_fp(frame: pl.DataFrame) -> float:
    """Share of unoverlapped kernels (with a baseline) that are cases or exceed 1.2x their baseline."""
    clean = frame.filter((pl.col("comm_overlap_ns") == 0) & pl.col("baseline_ns").is_not_null())
    return float((clean["is_slowdown"] | (clean["slowdown_ratio"] > 1.2)).mean()) if clean.height else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared/datasets/h200-ddp/nsys")
    args = ap.parse_args()
    found = pairs(args.corpus)
    truth = {name: detect(t, baseline=[i]).kernels for _, name, t, i in found}
    print(f"{'pair':<18}{'cases':>6}{'P':>7}{'R':>7}{'F1':>7}{'no forest':>10}{'changed':>8}{'in-run F1':>10}"
          f"{'unovl FP: twin/in-run/det':>28}")
    grid: dict[tuple[str, tuple[float, float]], float] = {}
    for _model, name, trace, _ in found:
        gt = truth[name]
        keep = normal(gt)
        single = detect(trace, single_trace=True).kernels
        plain = detect(trace, single_trace=True, detector=SlowdownDetector(band=1.2)).kernels
        inrun = detect(trace).kernels
        has_inrun = inrun["label_source"][0] == "inrun"
        p, r, f = prf(single["is_slowdown"].filter(keep), gt["is_slowdown"].filter(keep))
        nf = prf(plain["is_slowdown"].filter(keep), gt["is_slowdown"].filter(keep))[2]
        changed = int((plain["is_slowdown"] != single["is_slowdown"]).sum())
        ir = f"{prf(inrun['is_slowdown'].filter(keep), gt['is_slowdown'].filter(keep))[2]:.3f}" if has_inrun else "-"
        fps = "/".join(f"{unoverlapped_fp(x):.4f}" if x is not None else "-"
                       for x in (gt, inrun if has_inrun else None, single))
        print(f"{name:<18}{int(gt['is_slowdown'].sum()):>6}{p:>7.3f}{r:>7.3f}{f:>7.3f}{nf:>10.3f}{changed:>8}{ir:>10}"
              f"{fps:>28}")
        for band, cont in itertools.product(BANDS, CONTAMINATIONS):
            det = SlowdownDetector(band=band, contamination=cont)
            pred = detect(trace, single_trace=True, detector=det).kernels["is_slowdown"]
            grid[(name, (band, cont))] = prf(pred.filter(keep), gt["is_slowdown"].filter(keep))[2]
    print("\nleave one model out: settings chosen on the other models, F1 on the held-out one")
    models = sorted({m for m, *_ in found})
    for held in models:
        train = [n for m, n, *_ in found if m != held]
        test = [n for m, n, *_ in found if m == held]
        best = max(itertools.product(BANDS, CONTAMINATIONS),
                   key=lambda s: (sum(grid[(n, s)] for n in train) / len(train), -s[0]))
        scores = ", ".join(f"{n} {grid[(n, best)]:.3f}" for n in test)
        print(f"  held out {held:<9} band {best[0]}, contamination {best[1]}: {scores}")


if __name__ == "__main__":
    main()
