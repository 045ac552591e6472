"""The validation page's label sections: F1 by family held out, with and without the estimates' factors, and
the labels' scores per reference kind (``validation.families`` gives the figures)."""

from __future__ import annotations

import statistics
from typing import Any

from traceql.validation.sections import table

KIND_ORDER = ("clean", "borrowed", "corrected", "contaminated", "none")


def _f1(truth: int, cases: int, tp: int) -> tuple[float, float, float]:
    p = tp / cases if cases else (1.0 if tp == truth else 0.0)
    r = tp / truth if truth else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def by_family(res: dict[str, Any]) -> list[str]:
    """Per family held out: its runs' mean F1 with the shipped factors' kinds, without factors and with factors
    for every kind; its worst run and least precision (shipped)."""
    lab = res["labels"]
    rows = []
    for fam in sorted({r["family"] for r in lab}):
        mine = [r for r in lab if r["family"] == fam]
        kinds = "/".join(sorted({r["kind"].upper() for r in mine}))
        means = [statistics.mean(r[k] for r in mine) for k in ("f1", "f1_without", "f1_every_kind", "f1_decided")]
        rows.append((fam, kinds, str(len(mine)), *(f"{m:.3f}" for m in means[:3]), f"{means[0] - means[1]:+.3f}",
                     f"{min(r['f1'] for r in mine):.3f}", f"{min(r['precision'] for r in mine):.3f}",
                     f"{means[3]:.3f}"))
    every = [statistics.mean(r[k] for r in lab) for k in ("f1", "f1_without", "f1_every_kind", "f1_decided")]
    rows.append(("every run", "", str(len(lab)), *(f"{m:.3f}" for m in every[:3]), f"{every[0] - every[1]:+.3f}",
                 f"{min(r['f1'] for r in lab):.3f}", f"{min(r['precision'] for r in lab):.3f}", f"{every[3]:.3f}"))
    empty = res.get("labels_without_cases") or []
    return ["## Labels, family held out", "",
            "Each family's runs labelled with nothing that saw them: the detector's setting chosen on the other "
            "families' runs (without factors), the estimates' factors learned on the other families. F1: the mean "
            "over the family's runs with the kinds of factors `detect` ships "
            f"({', '.join(res.get('factor_kinds', ['contaminated']))}); without: no factors; every kind: factors "
            "for every kind of estimate, as once shipped; gain: shipped less without (the kinds shipped are those "
            "that cost no family F1 here, so this table chose them); worst and least P: the family's worst run; "
            "decided: the mean F1 on the kernels the labels decided (an undecided kernel left out, not counted a miss)."
            + (f" Runs whose twins found no case, left out: {', '.join(empty)}." if empty else ""), "",
            *table(("family held out", "GPUs", "runs", "F1", "without", "every kind", "gain", "worst", "least P",
                    "decided"), rows), ""]


def by_kind(res: dict[str, Any]) -> list[str]:
    """The labels of every run pooled per reference kind, with the shipped factors and without."""
    rows = []
    for kind in sorted({k for r in res["labels"] for k in r["kinds_shipped"]}, key=KIND_ORDER.index):
        cells: list[str] = [kind]
        for way in ("kinds_shipped", "kinds_without"):
            t, c, tp = (sum(r[way].get(kind, [0, 0, 0])[i] for r in res["labels"]) for i in range(3))
            p, rec, f = _f1(t, c, tp)
            prec = f"{p:.3f}" if c else "-"  # no case claimed: no precision
            cells += [str(t), str(c), prec, f"{rec:.3f}", f"{f:.3f}"] if way == "kinds_shipped" else [prec, f"{f:.3f}"]
        rows.append(tuple(cells))
    return ["### By reference kind", "",
            "Every run's judged kernels pooled by the reference the detector gave them: truth: twin cases; cases: "
            "the detector's; P, R, F1 with the shipped factors; P and F1 without. A contaminated reference (every "
            "instance at the kernel's place overlapped) is an upper bound: a kernel above 1.2x of it is a case, "
            "one below is undecided (counted here as not a case); none: no reference, never a case.", "",
            *table(("reference", "truth", "cases", "P", "R", "F1", "P without", "F1 without"), rows), ""]
