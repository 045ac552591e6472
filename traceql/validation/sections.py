"""Sections of the validation page beyond the matrix's own (``page.render`` puts them in): the library models'
serialized what-if, traced and without the profiler, and the error each class of run earned; and the markdown
table every section is drawn with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from traceql.verdicts.measured import IDLE_SHARE


def table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]], right: int = 1) -> list[str]:
    """A markdown table; columns from ``right`` on are right-aligned."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(str(c).rjust(w) if i >= right else str(c).ljust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))) + " |"
    sep = "| " + " | ".join(("-" * (w - 1) + ":") if i >= right else "-" * w for i, w in enumerate(widths)) + " |"
    return [line(head), sep, *(line(r) for r in rows)]


def library(res: dict[str, Any]) -> list[str]:
    """The library models' configurations (launch-bound, of families the matrix lacks), as the pooled table."""
    rows = [(r["config"], f"{r['traced']}/{r['stock']}/{r['serial']}", f"{r['idle']:.0%}", f"{r['stock_ms']:.2f}",
             f"{r['predicted_ms']:.2f}", f"{r['measured_ms']:.2f}", f"{r['error']:+.1%}",
             f"{r['saves_predicted_ms']:+.2f}", f"{r['saves_real_ms']:+.2f}",
             f"{r['real_low_ms']:+.2f} {r['real_high_ms']:+.2f}") for r in res.get("library") or []]
    if not rows:
        return []
    return ["## Serialized communication, library models", "",
            "Models the matrix lacks, from torchvision and transformers and a recommender (`datasets/library`), "
            "scored as above with communication alone fitted on every matrix configuration; their traced steps "
            "are the profiler's (it slowed them 4-69 %: `datasets/library/README.md`). idle: the share of a step "
            "their GPUs sat idle.", "",
            *table(("configuration", "runs", "idle", "stock", "predicted", "measured", "error", "saves", "real",
                     "real 95 %"), rows), "", *_untraced(res)]


def _untraced(res: dict[str, Any]) -> list[str]:
    """The serialized what-if without the profiler, where the runs timed their untraced steps."""
    rows = [(r["config"], f"{r['untraced_stock_ms']:.2f}", f"{r['untraced_predicted_ms']:.2f}",
             f"{r['untraced_measured_ms']:.2f}", f"{r['untraced_error']:+.1%}")
            for r in [*(res.get("pooled") or []), *(res.get("library") or [])]
            if "untraced_error" in r and r.get("idle", 0) > IDLE_SHARE]
    if not rows:
        return []
    return ["Without the profiler (the launch-bound configurations above and of the matrix): the stock runs' "
            "untraced step (the same processes outside the capture: the median of each run's median), the "
            "what-if's untraced serialized step (each traced stock run replayed with its CPU time calibrated to "
            "its untraced steps, then serialized: its untraced step times the replay's serialized over "
            "untraced), the serialized runs' untraced step, and the error. A GPU-bound run's profiler cost under "
            "5 % is not taken out (its untraced replay is its trace's).", "",
            *table(("configuration", "untraced stock", "predicted serial", "measured serial", "error"), rows), ""]


def alternating(res: dict[str, Any]) -> list[str]:
    """The serialized what-if against alternating runs (stock and serialized steps in one process)."""
    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x:+.2f}"

    rows = [(r["config"], str(r["runs"]), f"{r['idle']:.0%}", f"{r['stock_ms']:.2f}", f"{r['predicted_ms']:.2f}",
             f"{r['measured_ms']:.2f}", f"{r['error']:+.1%}", f"{r['saves_predicted_ms']:+.2f}",
             f"{r['saves_real_ms']:+.2f}", f"{r['real_low_ms']:+.2f} {r['real_high_ms']:+.2f}",
             ms(r.get("untraced_saves_predicted_ms")), ms(r.get("untraced_saves_real_ms")),
             "-" if r.get("untraced_error") is None else f"{r['untraced_error']:+.1%}")
            for r in res.get("alternating") or []]
    if not rows:
        return []
    return ["## Serialized communication, alternating runs", "",
            "Runs collected with `comm=alternate` (`datasets/library/h200-i`): odd steps serialized, even steps "
            "stock, in one process, so the CPU and the profiler's cost are the same on both sides of a pair; the "
            "real saving of a pair is the mean of the two serialized steps around a stock step less it (a drift "
            "over the run cancels), pooled over the runs' pairs (its 95 % interval: the pairs drawn again, "
            "4,000 times). Traced: the captured steps (wall clock) and the what-if on the stock steps of the "
            "trace; untraced: the same processes outside the capture, the what-if's untraced serialized step "
            "(its CPU calibrated to the stock steps' untraced median). The stock step in ms, the serialized one "
            "predicted (stock + predicted saving) and measured (stock + real saving), the error, the savings; "
            "untraced, the savings and the error.", "",
            *table(("configuration", "runs", "idle", "stock", "predicted", "measured", "error", "saves", "real",
                    "real 95 %", "untraced saves", "real", "error"), rows), ""]


def classes(res: dict[str, Any]) -> list[str]:
    """The error each class of run earned (``classes``), and whether it held with the family held out."""
    rows = []
    for key, c in (res.get("classes") or {}).items():
        held = c["held_out"]
        widths = [2 * h["bound"] for h in held if h["bound"] is not None]
        rows.append((key, str(c["configurations"]), ", ".join(c["families"]), f"±{c['serialized']:.1%}",
                     f"±{c['saving_ms']:.2f}", "-" if c["straggler"] is None else f"±{c['straggler']:.1%}",
                     f"{sum(h['covered'] for h in held)}/{len(held)}", f"{max(widths):.1%}" if widths else "-"))
    if not rows:
        return []
    return ["## Intervals, by class of run", "",
            "`whatif` gives a figure an interval only where runs of its class (GPU kind; GPU-bound, or "
            "launch-bound: GPUs idle more than 20 % of a step) were validated: the run's own steps' spread "
            "widened by the worst error of the class below (serialized and saving over the configurations, the "
            "straggler over the injected runs of its models). held: configurations whose real serialized step "
            "lay within the worst error of the other families' configurations of the class (the family held "
            "out); widest: that interval's width as a share of the step, the run's own spread left out. A model "
            "with alternating runs on the GPU kind counts by them, not by its separate runs; a class of one "
            "family has no interval.", "",
            *table(("class", "configs", "families", "serialized", "saving ms", "straggler", "held", "widest"),
                    rows), ""]
