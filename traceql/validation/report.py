"""Every verdict scored on the ground-truth matrix (``results``; ``page`` shows them).

Labels: scored with a whole model family held out (``families``), the library models' runs with twins included:
for each family, the estimates' factors learned from the other families and the setting with the best mean F1
over their runs, then scored on that family's runs alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from traceql.analyzers.detection.threshold import PAIRED_FACTOR
from traceql.analyzers.replay.alone import CommAlone, fit
from traceql.validation import alternating, caps, classes, families, whatifs
from traceql.validation.matrix import Matrix, Pooled, family

BANDS, CONTAMINATIONS, MARGINS = (1.1, 1.15, PAIRED_FACTOR), (0.05, 0.1), (0.0, 0.01)
# band, contamination, margin; at band = threshold the forest decides nothing: one contamination will do
SETTINGS = [s for s in itertools.product(BANDS, CONTAMINATIONS, MARGINS)
            if s[0] < PAIRED_FACTOR or s[1] == CONTAMINATIONS[-1]]


def _serial_rows(matrix: Matrix, progress: Callable[[str], None],
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, float]]:
    """Per configuration of one host, and per configuration over every host of its GPU kind (``pooled``: light
    repeats included), the serialized what-if with the collectives' speed alone fitted on the other models'
    configurations (leave-one-model-out); and the fit on every configuration (what ``whatif`` ships)."""
    configs = [cfg for cfg in matrix.configurations() if cfg.serial]
    pairs: dict[str, list] = {}
    for cfg in configs:
        progress(f"communication alone: {cfg.name}")
        runs = zip(cfg.stock, cfg.serial, strict=False)  # a noisy configuration's repeats, paired in order
        pairs[cfg.name] = [(whatifs.comm_tails(a), whatifs.comm_tails(b)) for a, b in runs]
    rows = []
    for cfg in configs:
        progress(f"serialized: {cfg.name}")
        comm = fit([p for c in configs if family(c.model) != family(cfg.model) for p in pairs[c.name]])
        s = whatifs.serialized(cfg.stock, cfg.serial, comm)
        rows.append({"config": cfg.name, "gpu": cfg.gpu, "model": cfg.model, "world": cfg.world, "cap": cfg.cap,
                     "wait_us": comm.wait_ns / 1e3, "share": comm.share,
                     "runs": len(cfg.stock), "stock_ms": s.stock_ns / 1e6, "predicted_ms": s.predicted_ns / 1e6,
                     "measured_ms": s.measured_ns / 1e6, "hook_ms": s.hook_ns / 1e6, "error": s.error,
                     "saves_predicted_ms": s.change_predicted_ns / 1e6, "saves_real_ms": s.change_real_ns / 1e6})
    every = fit([p for c in configs for p in pairs[c.name]])
    pooled = []
    for p in matrix.pooled():
        progress(f"serialized, hosts pooled: {p.name}")
        comm = fit([x for c in configs if family(c.model) != family(p.model) for x in pairs[c.name]])
        pooled.append(_pooled_row(p, whatifs.pooled(p, comm), wait_us=comm.wait_ns / 1e3, share=comm.share))
    return rows, pooled, {"wait_ns": every.wait_ns, "share": every.share}


def _pooled_row(p: Pooled, s: whatifs.PooledSerialized, **fit: float) -> dict[str, Any]:
    """A pooled configuration's row (``fit``: the collectives' speed alone it was given, where fitted for it),
    with its untraced figures (ms) and the untraced serialized step's error where its runs timed them."""
    row = {"config": p.name, "gpu": p.gpu, "model": p.model, "world": p.world, "cap": p.cap, **fit,
           "traced": len(p.traced), "stock": len(p.stock), "serial": len(p.serial),
           "stock_ms": s.stock_ns / 1e6, "predicted_ms": s.predicted_ns / 1e6,
           "measured_ms": s.measured_ns / 1e6, "error": s.error,
           "saves_predicted_ms": s.change_predicted_ns / 1e6, "saves_real_ms": s.change_real_ns / 1e6,
           "real_low_ms": s.real_interval_ns[0] / 1e6, "real_high_ms": s.real_interval_ns[1] / 1e6,
           "idle": s.idle}
    if s.untraced_predicted_ms is not None and s.untraced_measured_ms is not None:
        row.update(untraced_stock_ms=s.untraced_stock_ms, untraced_predicted_ms=s.untraced_predicted_ms,
                   untraced_measured_ms=s.untraced_measured_ms,
                   untraced_error=s.untraced_predicted_ms / s.untraced_measured_ms - 1)
    return row


def _library_rows(library: Matrix, comm: dict[str, float], progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Per configuration of the library's models (``datasets/library``: families the matrix lacks, launch-bound),
    the serialized what-if pooled as for the matrix, the collectives alone as fitted on every matrix
    configuration (none of them of these families)."""
    model = CommAlone(comm["wait_ns"], comm["share"])
    out = []
    for p in library.pooled():
        progress(f"serialized, library: {p.name}")
        out.append(_pooled_row(p, whatifs.pooled(p, model)))
    return out


def _injected_rows(matrix: Matrix, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    rows = []
    for role, way in (("cpu-straggler", "without straggler"), ("gpu-delay", "without straggler"),
                      ("gpu-delay", "delay shortened")):
        for run in matrix.injected(role):
            progress(f"{way}: {run.name}")
            x = whatifs.without_straggler(run) if way == "without straggler" else whatifs.shortened_delay(run)
            rows.append({"run": run.label, "gpu": run.gpu, "model": run.model, "role": role, "way": way,
                         "normal_ms": x.normal_ns / 1e6, "delayed_ms": x.delayed_ns / 1e6,
                         "predicted_ms": x.predicted_ns / 1e6, "error": x.error, "recovered": x.recovered,
                         "named": x.named})
    return rows


def results(matrix: Matrix, progress: Callable[[str], None] = lambda _: None,
            library: Matrix | None = None, labelled: list[Matrix] | None = None) -> dict[str, Any]:
    """Every verdict on every run of ``matrix``: labels per stock run, serialized per configuration, the
    straggler and delay what-ifs per injected run; with ``library``, the serialized what-if on its
    configurations too (``library``) and on its alternating runs (``alternating``), and the intervals each class
    of run earned (``classes``). ``labelled``: more matrices whose stock runs with twins are labelled too (the
    library models'; ``library`` is one of them where given)."""
    serial, pooled, comm = _serial_rows(matrix, progress)
    more = [*([library] if library is not None else []), *(labelled or [])]
    labels, factors, settings, no_cases = families.rows([matrix, *more], SETTINGS, progress)
    extra = _library_rows(library, comm, progress) if library is not None else []
    alone = CommAlone(comm["wait_ns"], comm["share"])
    paired = alternating.rows(library, alone, progress) if library is not None else []
    out = {"factors": factors, "settings": settings, "comm_alone": comm, "labels_without_cases": no_cases,
           "families": sorted({r["family"] for r in labels}), "labelled_runs": len(labels),
            "runs": len(matrix.runs) + len(matrix.repeats), "repeats": len(matrix.repeats),
            "gpus": sorted({r.kind for r in matrix.runs}), "pooled": pooled,
            "hosts": sorted({r.gpu for r in matrix.runs + matrix.repeats}),
            "configurations": len(matrix.configurations()), "labels": labels,
            "serialized": serial, "injected": _injected_rows(matrix, progress), "caps": caps.rows(matrix, progress),
            "library": extra, "alternating": paired}
    out["classes"] = classes.results(out)
    return out
