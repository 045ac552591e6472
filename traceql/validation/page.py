"""The validation page (``render``) and the sentences that give each verdict its measured error
(``verdict_errors``), from the figures ``report.results`` gives."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from traceql.analyzers.detection.threshold import PAIRED_FACTOR
from traceql.validation.label_sections import by_family, by_kind
from traceql.validation.sections import alternating, classes, library, table


def _spread(rows: list[dict[str, Any]], key: str, worst: Callable[[list[float]], float], fmt: str,
            name: str = "run") -> tuple[str, str, str]:
    vals = [(r[key], r[name]) for r in rows if r.get(key) is not None and r[key] == r[key]]
    if not vals:
        return "0", "-", "-"
    bad = worst([v for v, _ in vals])
    where = next(n for v, n in vals if v == bad)
    return str(len(vals)), format(statistics.median(v for v, _ in vals), fmt), f"{format(bad, fmt)} ({where})"


def within(r: dict[str, Any]) -> bool:
    """The overlap saving predicted within max(0.5 ms, 30 % of the real one)."""
    return abs(r["saves_predicted_ms"] - r["saves_real_ms"]) <= max(0.5, 0.3 * abs(r["saves_real_ms"]))


def sign_right(r: dict[str, Any]) -> bool:
    return (r["saves_predicted_ms"] > 0) == (r["saves_real_ms"] > 0)


def known_sign(r: dict[str, Any]) -> bool:
    """The real saving's 95 % interval excludes 0: its sign is known."""
    return r["real_low_ms"] > 0 or r["real_high_ms"] < 0


def _serial_lines(rows: list[dict[str, Any]], title: str) -> list[tuple[str, str, str, str]]:
    worst = lambda v: max(v, key=abs)  # noqa: E731
    for r in rows:
        r["saving_gap_ms"] = r["saves_predicted_ms"] - r["saves_real_ms"]
    n = str(len(rows))
    out = [(f"serialized step, error{title}", *_spread(rows, "error", worst, "+.1%", "config")),
           ("  overlap saving, predicted - real ms", *_spread(rows, "saving_gap_ms", worst, "+.2f", "config")),
           ("  within max(0.5 ms, 30 %)", n, f"{sum(map(within, rows))}/{n}", "-"),
           ("  sign right", n, f"{sum(map(sign_right, rows))}/{n}", "-")]
    if rows and "real_low_ms" in rows[0]:
        known = [r for r in rows if known_sign(r)]
        out += [("  sign right where the runs know it", str(len(known)),
                 f"{sum(map(sign_right, known))}/{len(known)}", "-")]
    return out


def _summary(res: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    lab, ser, inj = res["labels"], res["serialized"], res["injected"]
    lines = [("detector F1, family held out", *_spread(lab, "f1", min, ".3f")),
             ("  without kernels within 3 % of 1.2x", *_spread(lab, "f1_far", min, ".3f")),
             ("  precision", *_spread(lab, "precision", min, ".3f")),
             ("  recall", *_spread(lab, "recall", min, ".3f")),
             ("  F1 on the kernels it decided", *_spread(lab, "f1_decided", min, ".3f")),
             ("  precision on them", *_spread(lab, "precision_decided", min, ".3f")),
             ("  share of the judged kernels decided", *_spread(lab, "decided", min, ".3f")),
             ("  time lost / the twins' excess", *_spread(lab, "lost_ratio", min, ".2f")),
             ("in-run labels F1", *_spread(lab, "inrun_f1", min, ".3f"))]
    if res.get("pooled"):
        lines += _serial_lines(res["pooled"], ", hosts pooled")
    lines += _serial_lines(ser, ", one host" if res.get("pooled") else "")
    if res.get("alternating"):  # the library models' step pairs in one process (``validation.alternating``)
        paired = res["alternating"]
        lines += _serial_lines(paired, ", alternating runs")
        lines.append(("  untraced, error", *_spread(paired, "untraced_error", lambda v: max(v, key=abs), "+.1%",
                                                    "config")))
    cap = res.get("caps", [])
    for r in cap:
        r["change_gap_ms"] = r["change_predicted_ms"] - r["change_real_ms"]
    lines += [("another bucket cap, error", *_spread(cap, "error", lambda v: max(v, key=abs), "+.1%", "config")),
              ("  step change, predicted - real ms", *_spread(cap, "change_gap_ms", lambda v: max(v, key=abs),
                                                             "+.2f", "config"))]
    for role, way in (("cpu-straggler", "without straggler"), ("gpu-delay", "without straggler"),
                      ("gpu-delay", "delay shortened")):
        part = [r for r in inj if r["role"] == role and r["way"] == way]
        label = f"{way} ({'CPU sleep' if role == 'cpu-straggler' else 'GPU delay'}), error"
        lines.append((label, *_spread(part, "error", lambda v: max(v, key=abs), "+.1%")))
        lines.append(("  share of the delay removed", *_spread(part, "recovered", min, ".2f")))
    return lines


def _groups(res: dict[str, Any]) -> list[str]:
    out = []
    for key, title in (("model", "model"), ("gpu", "GPU host"), ("cap", "bucket cap (MB)"), ("world", "GPUs")):
        names = sorted({str(r[key]) for r in res["labels"]})
        rows = []
        for n in names:
            lab = [r for r in res["labels"] if str(r[key]) == n]
            ser = [r for r in res["serialized"] if str(r[key]) == n]
            f1 = [r["f1"] for r in lab]
            err = [r["error"] for r in ser]
            rows.append((n, str(len(lab)), f"{statistics.median(f1):.3f}", f"{min(f1):.3f}",
                         f"{statistics.median(err):+.1%}" if err else "-",
                         f"{max(err, key=abs):+.1%}" if err else "-"))
        out += [f"### By {title}", "", *table((title, "runs", "F1 median", "F1 worst", "serialized median",
                                                 "serialized worst"), rows), ""]
    return out


def _settings(res: dict[str, Any]) -> list[str]:
    """Each setting of the detector's mean F1 over every stock run, best first; which one `detect` ships."""
    if "settings" not in res:
        return []
    from traceql.analyzers.detection.detector import SlowdownDetector

    d = SlowdownDetector()
    ship = (d.band, d.contamination, d.margin)
    rows = [(f"{s['band']}", f"{s['contamination']}" if s["band"] < PAIRED_FACTOR else "-", f"{s['margin']:g}",
             f"{s['f1']:.3f}",
             "yes" if (s["band"], s["contamination"], s["margin"]) == ship
             or (s["band"] == ship[0] == d.threshold and s["margin"] == ship[2]) else "")
            for s in sorted(res["settings"], key=lambda s: -s["f1"])]
    return ["## The detector's settings", "",
            "Mean F1 over every stock run at each setting (without factors). band: from this ratio up to the "
            "threshold the forest decides (at the threshold, "
            f"{PAIRED_FACTOR}, it decides nothing and contamination does not matter); margin: a case's ratio must "
            "pass the threshold by this share. shipped: `detect`'s default.", "",
            *table(("band", "contamination", "margin", "mean F1", "shipped"), rows, right=0), ""]


def _factors(res: dict[str, Any]) -> list[str]:
    """The estimates' factors `detect` ships (learned from every family), and how many each family was scored
    with."""
    if "factors" not in res:
        return []
    rows = [(kind, "(every kernel)" if ident is None else ident if len(ident) <= 64 else ident[:61] + "...",
             f"{factor:.3f}", str(models)) for kind, ident, factor, models in res["factors"]["all"]]
    held = ", ".join(f"{m} {len(t)}" for m, t in res["factors"].items() if m != "all")
    return ["## Learned estimate factors", "",
            "A within-trace estimate of this kind of reference and kernel is divided by its factor: the median over "
            "the families that ran it of each family's median estimate / twin "
            "([detect](commands/detect.md#learned-factors)). What `detect` ships for runs on the GPU kinds above, "
            "learned from every family; each "
            f"family's labels above were made with those learned without it (factors: {held}).", "",
            *table(("reference", "kernel identity", "factor", "models"), rows, right=2), ""]


def render(res: dict[str, Any]) -> str:
    """The validation page (markdown) for ``results``."""
    gpus = ", ".join(g.upper() for g in res["gpus"])
    n_hosts = len(res.get("hosts", res["gpus"]))
    hosts = f"{n_hosts} host{'s' if n_hosts > 1 else ''}"
    out = ["# Validation on the ground-truth matrix", "",
           f"Generated by `python bench/validate.py` from `datasets/groundtruth/` ({res['runs']} runs, "
           f"{res['configurations']} configurations, {gpus}, {hosts}); do not edit by hand. "
           "How the matrix was collected: [the ground-truth matrix](groundtruth.md)."
           + (f" Labels are scored on {res['labelled_runs']} stock runs with twins of {len(res['families'])} model "
              "families: the matrix's and the library models' (`datasets/library/h100-f`, `datasets/families`), each "
              "family held out; the what-if on the matrix and the library models' runs." if "families" in res else ""),
           "",
           "## Summary", "", "Worst: the value furthest from right, and where.", "",
           *table(("verdict", "n", "median", "worst"), _summary(res)), "", "## By group", "",
           "Detector F1 (family held out) and the serialized step's error.", "", *_groups(res),
           *by_family(res), *by_kind(res)]
    lab = [(r["run"], str(r["truth"]), str(r["cases"]), f"{r['precision']:.3f}", f"{r['recall']:.3f}",
            f"{r['f1']:.3f}", f"{r['f1_without']:.3f}", f"{r['f1_far']:.3f}", f"{r['lost_ratio']:.2f}",
            "-" if r["inrun_f1"] is None else f"{r['inrun_f1']:.3f}",
            f"{r['band']}/{r['contamination']}/{r.get('margin', 0.01):g}")
           for r in res["labels"]]
    out += ["## Labels, per stock run", "",
            "truth: twin cases; cases: the detector's; far: F1 without the kernels within 3 % of the threshold; "
            "lost: the time lost the detector claims over the twins' excess; settings: band/contamination/margin "
            "chosen on the other families' runs, without factors; F1 with the estimates' factors learned on them "
            "(without: none).", "",
            *table(("run", "truth", "cases", "P", "R", "F1", "without", "far", "lost", "in-run", "settings"), lab),
            "",
            *_settings(res), *_factors(res)]
    ser = [(r["config"], f"{r['stock_ms']:.2f}", f"{r['predicted_ms']:.2f}", f"{r['measured_ms']:.2f}",
            f"{r.get('hook_ms', 0.0):.2f}", f"{r['error']:+.1%}", f"{r['saves_predicted_ms']:+.2f}",
            f"{r['saves_real_ms']:+.2f}") for r in res["serialized"]]
    if res.get("pooled"):
        pool = [(r["config"], f"{r['traced']}/{r['stock']}/{r['serial']}", f"{r['stock_ms']:.2f}",
                 f"{r['predicted_ms']:.2f}", f"{r['measured_ms']:.2f}", f"{r['error']:+.1%}",
                 f"{r['saves_predicted_ms']:+.2f}", f"{r['saves_real_ms']:+.2f}",
                 f"{r['real_low_ms']:+.2f} {r['real_high_ms']:+.2f}",
                 " ".join(w for w, bad in (("off", not within(r)), ("sign", not sign_right(r))) if bad))
                for r in res["pooled"]]
        out += ["## Serialized communication, per configuration", "",
                "A configuration's runs on every host of its GPU kind together (the light repeats included: "
                "their measured steps alone). runs: traced stock / all stock / serialized runs. Step times in ms "
                "(the trace's, first captured step left out; the median of each run's median): the stock runs, "
                "the what-if's serialized step (on each traced stock run), the serialized runs' measured step "
                "less their hook's gaps (below); the overlap saving predicted (the median over the traced stock "
                "runs of serialized less their own step) and real (serialized less stock, measured), and the "
                "real one's 95 % interval (each run's median drawn again with replacement within its side, 4,000 "
                "times; with two or three runs a side it comes out narrower than the runs really spread, so it "
                "serves only to say whether the real saving's sign is known: `sign right where the runs know it` "
                "above); `off`: not within max(0.5 ms, 30 %) of the real one; `sign`: of the other sign.", "",
                *table(("configuration", "runs", "stock", "predicted", "measured", "error", "saves", "real",
                         "real 95 %", ""), pool), ""]
    out += [*library(res), *alternating(res), *classes(res)]
    out += ["## Serialized communication, per configuration and host", "",
            "Step times in ms (the trace's, first captured step left out, medians): the stock run, the what-if's "
            "serialized step, the serialized run's measured step less the hook's gaps (`hook`: the time its "
            "all-reduces sat apart beyond back to back, which the first hook, `h100-a` and `h100-b`, spent "
            "copying each bucket's sums between them); the overlap saving predicted and real.", "",
            *table(("configuration", "stock", "predicted", "measured", "hook", "error", "saves", "real"), ser), ""]
    cap = [(r["config"], f"{r['own_ms']:.2f}", f"{r['predicted_ms']:.2f}", f"{r['measured_ms']:.2f}",
            f"{r['error']:+.1%}", f"{r['change_predicted_ms']:+.2f}", f"{r['change_real_ms']:+.2f}")
           for r in res.get("caps", [])]
    out += ["## Another bucket cap, per configuration and direction", "",
            "`whatif --bucket-cap` on the stock run at one cap (-> the other), against the stock run at the other "
            "cap (same host, model and GPUs); step times in ms as above: the run's own, predicted, measured; the "
            "change predicted and real. Caps of 2 and 25 MB move these steps less than two runs of one "
            "configuration differ; h100-d's pairs (25 MB against 400 and 1000 MB: every gradient in one bucket, "
            "reduced after the backward) move them more.", "",
            *table(("configuration", "own", "predicted", "measured", "error", "change", "real"), cap), ""]
    inj = [(r["run"], r["way"], f"{r['normal_ms']:.2f}", f"{r['delayed_ms']:.2f}", f"{r['predicted_ms']:.2f}",
            f"{r['error']:+.1%}", f"{r['recovered']:.2f}", "yes" if r["named"] else "no") for r in res["injected"]]
    out += ["## Stragglers and GPU delays", "",
            "Rank 1 late in steps 3 and 5 (a 30 ms CPU sleep, or a 12 ms spin kernel on its GPU). normal: the "
            "other steps; delayed: the injected steps; predicted: the what-if's answer for them; removed: the "
            "share of the delay it takes away; named: it names rank 1 (for the shortened delay: it found the "
            "spin kernels).", "",
            *table(("run", "what-if", "normal", "delayed", "predicted", "error", "removed", "named"), inj,
                    right=2), ""]
    return "\n".join(out)


def _pct(values: list[float]) -> str:
    worst = max(values, key=abs)
    return f"median error {statistics.median(values):+.1%}, worst {worst:+.1%}"


def verdict_errors(res: dict[str, Any]) -> dict[str, str]:
    """Per docs page, the sentence that gives its verdicts their measured error on the matrix (a test keeps the
    pages saying exactly this)."""
    lab, ser, inj = res["labels"], res.get("pooled") or res["serialized"], res["injected"]
    f1 = [r["f1"] for r in lab]
    inrun = [r["inrun_f1"] for r in lab if r["inrun_f1"] is not None]
    right = sum(map(sign_right, ser))
    cpu = [r for r in inj if r["role"] == "cpu-straggler"]
    gpu = [r for r in inj if r["role"] == "gpu-delay" and r["way"] == "without straggler"]
    named = sum(r["named"] for r in cpu + gpu)
    cap = [r["error"] for r in res.get("caps", [])]
    where = (f"Measured on the [ground-truth matrix](../validation.md) ({res['runs']} runs, "
             f"{res['configurations']} configurations)")
    return {
        "commands/detect.md": f"{where}: single-trace detector F1 median {statistics.median(f1):.3f}, worst "
                              f"{min(f1):.3f} ({len(lab)} runs of {len({r['family'] for r in lab})} model families, "
                              "each held out); in-run labels F1 median "
                              f"{statistics.median(inrun):.3f}, worst {min(inrun):.3f}.",
        "commands/whatif.md": f"{where}: serialized: {_pct([r['error'] for r in ser])}; overlap saving of the "
                              f"right sign in {right} of {len(ser)}; another bucket cap: {_pct(cap or [0.0])}; "
                              "without straggler, CPU sleep: "
                              f"{_pct([r['error'] for r in cpu])}; GPU delay: {_pct([r['error'] for r in gpu])}.",
        "commands/ranks.md": f"{where}: the injected straggler named in {named} of {len(cpu + gpu)} runs "
                             f"({sum(r['named'] for r in cpu)} of {len(cpu)} CPU sleeps, "
                             f"{sum(r['named'] for r in gpu)} of {len(gpu)} GPU delays).",
    }
