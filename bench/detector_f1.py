"""Score every label source against twin labels, per pair and per reference kind.

    python bench/detector_f1.py [--corpus ../shared/datasets/h200-ddp/nsys] [--grid]

Twin labels (`detect TRACE --baseline ISOLATED`) are the truth, over the kernels of the normal steps that have a
twin (a kernel the isolated run lacks, such as FSDP's copies, is not judged). Per pair and label
source (the single-trace detector with the isolated steps hidden; in-run labels with all the run's isolated
steps, and with its first one only) it prints precision / recall / F1, the share of the source's cases on
each reference kind (twin, clean, borrowed, corrected, contaminated) and the precision of the cases judged
on a clean reference alone. The forest's ablation: the detector's F1 with the forest deciding a band from
1.1 (the default has none: band = threshold) and how many labels it changes. With ``--grid``, the band and
contamination chosen leave-one-model-out (settings picked on the other models, F1 on the held-out one).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
from pathlib import Path

import polars as pl

from traceql.analyzers.baselines.kinds import CLEAN, ESTIMATED, TWIN
from traceql.analyzers.detection.detector import SlowdownDetector
from traceql.commands.detect import detect
from traceql.labelling.inputs import read_timeline
from traceql.labelling.label import label
from traceql.validation.scoring import judged

ROOT = Path(__file__).resolve().parents[1]
BANDS, CONTAMINATIONS = (1.05, 1.1, 1.15, 1.2), (0.02, 0.05, 0.1, 0.2)
KINDS = (TWIN, *ESTIMATED)


def pairs(corpus: Path) -> list[tuple[str, str, Path, Path]]:
    """(model, name, trace, isolated run) of every pair we have."""
    out = [("toy" if m == "toy" else "gpt2", f"{m} {c}", corpus / f"{m}_ddp2_{c}.sqlite", corpus / f"{m}_single.sqlite")
           for m in ("toy", "gpt2") for c in ("cap25", "cap2")]
    ours = ROOT / "datasets"
    out += [("gpt2", "embedded gpt2", ours / "default/gpt2-nsys", ours / "default/gpt2-single-nsys"),
            ("gpt2", "in-run gpt2", ours / "inrun/gpt2-inrun-nsys", ours / "inrun/gpt2-single-nsys"),
            ("gpt2", "in-run gpt2 cap2", ours / "runs/gpt2-cap2-inrun-nsys", ours / "inrun/gpt2-single-nsys"),
            ("resnet50", "in-run resnet50", ours / "runs/resnet50-inrun-nsys", ours / "runs/resnet50-single-nsys"),
            ("gpt2", "gpt2 4 GPUs", ours / "runs/gpt2-4rank-nsys", ours / "inrun/gpt2-single-nsys"),
            ("gpt2", "gpt2 FSDP2", ours / "runs/gpt2-fsdp2-nsys", ours / "runs/gpt2-fsdp2-single-nsys"),
            ("gpt2", "gpt2 FSDP2 strag", ours / "runs/gpt2-fsdp2-straggler-nsys",
             ours / "runs/gpt2-fsdp2-single-nsys"),
            ("gpt2", "gpt2 4 GPUs cap2", ours / "runs/gpt2-4rank-cap2-nsys", ours / "inrun/gpt2-single-nsys"),
            ("gpt2", "gpt2 FSDP2 4 GPU", ours / "runs/gpt2-fsdp2-4rank-nsys", ours / "runs/gpt2-fsdp2-single-nsys"),
            ("llama", "llama 4 GPUs", ours / "runs/llama-4rank-cap25-nsys", ours / "runs/llama-single-nsys"),
            ("llama", "llama 4 GPU cap2", ours / "runs/llama-4rank-cap2-nsys", ours / "runs/llama-single-nsys"),
            ("llama", "llama 4 GPU strag", ours / "runs/llama-4rank-straggler-nsys", ours / "runs/llama-single-nsys"),
            ("tp", "block TP", ours / "runs/block-tp-nsys", ours / "runs/block-tp-single-nsys"),
            ("tp", "block TP strag", ours / "runs/block-tp-straggler-nsys", ours / "runs/block-tp-single-nsys")]
    return [p for p in out if p[2].exists()]


def prf(pred: pl.Series, truth: pl.Series) -> tuple[float, float, float]:
    """Precision, recall, F1; an undecided label (null) is not a case, so a true case left undecided is missed."""
    pred, truth = pred.fill_null(False), truth.fill_null(False)
    tp, fp, fn = int((pred & truth).sum()), int((pred & ~truth).sum()), int((~pred & truth).sum())
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def first_isolated_step(trace: Path) -> pl.DataFrame:
    """The in-run labels of ``trace`` with only its first isolated step kept (the others dropped)."""
    timeline = read_timeline(trace)
    k = timeline.kernels
    iso = k.filter(pl.col("step_kind") == "isolated")
    first = iso.group_by("run_id", "rank").agg(pl.col("step").min().alias("_first"))
    kept = k.join(first, on=["run_id", "rank"], how="left", maintain_order="left").filter(
        (pl.col("step_kind") != "isolated").fill_null(True) | (pl.col("step") == pl.col("_first"))).drop("_first")
    return label(dataclasses.replace(timeline, kernels=kept)).kernels


def row(name: str, source: str, frame: pl.DataFrame, truth: pl.DataFrame, more: str = "") -> None:
    """One line: P/R/F1 over the kernels the twins judge, the cases' share per reference kind, clean-only
    precision."""
    on = frame.join(truth.select("run_id", "rank", "stream", "start_ns", pl.col("is_slowdown").alias("_gt"),
                                 judged(truth).alias("_judged")),
                    on=["run_id", "rank", "stream", "start_ns"], how="left", maintain_order="left")
    keep = on["_judged"].fill_null(False)
    pred, gt = on["is_slowdown"].filter(keep), on["_gt"].fill_null(False).filter(keep)
    p, r, f = prf(pred, gt)
    nums = f"{p:>7.3f}{r:>7.3f}{f:>7.3f}" if gt.any() or pred.any() else f"{'-':>7}{'-':>7}{'-':>7}"
    cases = on.filter(keep & on["is_slowdown"])
    shares = "/".join(f"{100 * float((cases['reference_kind'] == k).mean()):.0f}" if cases.height else "-"
                      for k in KINDS)
    clean = on.filter(keep & (on["reference_kind"] == CLEAN))
    cp = prf(clean["is_slowdown"], clean["_gt"].fill_null(False))[0] if clean["is_slowdown"].any() else None
    print(f"{name:<17}{source:<9}{int(gt.sum()):>6}{int(pred.sum()):>6}{nums}"
          f"{'-' if cp is None else f'{cp:.3f}':>8}  {shares:<15}{more}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared/datasets/h200-ddp/nsys")
    ap.add_argument("--grid", action="store_true", help="also choose band and contamination leave-one-model-out")
    ap.add_argument("--only", metavar="TEXT", help="only the pairs whose name holds TEXT")
    args = ap.parse_args()
    found = [p for p in pairs(args.corpus) if args.only is None or args.only in p[1]]
    print(f"{'pair':<17}{'source':<9}{'twin':>6}{'cases':>6}{'P':>7}{'R':>7}{'F1':>7}{'clean P':>8}  "
          f"{'% cases on':<15}forest from 1.1: F1, labels changed")
    print(f"{'':<17}{'':<9}{'':>6}{'':>6}{'':>7}{'':>7}{'':>7}{'':>8}  {'tw/cl/bo/co/ct':<15}")
    grid: dict[tuple[str, tuple[float, float]], float] = {}
    f1s, agree = [], []
    for _model, name, trace, iso in found:
        truth = detect(trace, baseline=[iso]).kernels
        keep = judged(truth)
        single = detect(trace, single_trace=True).kernels
        plain = detect(trace, single_trace=True, detector=SlowdownDetector(band=1.1)).kernels  # the forest decides
        nf = prf(plain["is_slowdown"].filter(keep), truth["is_slowdown"].filter(keep))[2]
        changed = int(plain["is_slowdown"].ne_missing(single["is_slowdown"]).sum())
        some = single["is_slowdown"].filter(keep).any() or truth["is_slowdown"].filter(keep).any()
        row(name, "detector", single, truth, f"{nf:.3f}, {changed}" if some else f"-, {changed}")
        if some:
            f1s.append(prf(single["is_slowdown"].filter(keep), truth["is_slowdown"].filter(keep))[2])
        else:  # no case on either side: they agree, and F1 says nothing
            agree.append(name)
        inrun = detect(trace).kernels
        if inrun["label_source"][0] == "inrun":
            row("", "in-run", inrun, truth)
            row("", "in-run 1", first_isolated_step(trace), truth)
        if args.grid:
            for band, cont in itertools.product(BANDS, CONTAMINATIONS):
                det = SlowdownDetector(band=band, contamination=cont)
                pred = detect(trace, single_trace=True, detector=det).kernels["is_slowdown"]
                grid[(name, (band, cont))] = prf(pred.filter(keep), truth["is_slowdown"].filter(keep))[2]
    print((f"\ndetector F1: mean {sum(f1s) / len(f1s):.3f}, least {min(f1s):.3f} over {len(f1s)} pairs"
           if f1s else "\ndetector F1: no pair with a case")
          + (f"; no case on either side in {', '.join(agree)}" if agree else ""))
    print("% cases on: the share of the source's cases judged on each reference kind: twin, clean, borrowed, "
          "corrected, contaminated")
    if not args.grid:
        return
    print("\nleave one model out: settings chosen on the other models, F1 on the held-out one")
    for held in sorted({m for m, *_ in found}):
        train = [n for m, n, *_ in found if m != held]
        test = [n for m, n, *_ in found if m == held]
        best = max(itertools.product(BANDS, CONTAMINATIONS),
                   key=lambda s: (sum(grid[(n, s)] for n in train) / len(train), -s[0]))
        scores = ", ".join(f"{n} {grid[(n, best)]:.3f}" for n in test)
        print(f"  held out {held:<9} band {best[0]}, contamination {best[1]}: {scores}")


if __name__ == "__main__":
    main()
