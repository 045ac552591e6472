"""The labelled result of one run or of several: per-rank summary, top slowed signatures, one row per
compute kernel, per-step costs; several runs' results merged into one."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import polars as pl

from traceql.analyzers.cases import rank_cases
from traceql.analyzers.causes import CAUSES, HELD
from traceql.labelling.modes import LabelSource, combine
from traceql.labelling.options import TOP
from traceql.model import schema


@dataclass(frozen=True)
class StoredRows:
    """The labelled rows of a run too large to hold at once: parquet files written a rank at a time, in the
    run's order, and what a result says of them (counts by baseline and reference kind). The files live as
    long as ``holder`` (a temporary folder) does: as long as a result that holds them."""

    files: tuple[Path, ...]
    compute_kernels: int
    cases: int
    baseline_kinds: dict[str, int]
    reference_kinds: dict[str, dict[str, int]]
    renames: dict[str, str] = field(default_factory=dict)  # run ids renamed when results were merged
    holder: Any = None

    def scan(self) -> pl.LazyFrame:
        """The rows, lazily (the files' columns in one type each, as results' frames are put together)."""
        if not self.files:
            return schema.empty(schema.CASES).lazy()
        frame = pl.concat([pl.scan_parquet(f) for f in self.files], how="diagonal_relaxed")
        return frame.with_columns(pl.col("run_id").replace(self.renames)) if self.renames else frame

    def parts(self) -> Any:
        """The rows a file at a time, in order, each in the types of :meth:`scan` (what writing them out holds at
        once)."""
        types = self.scan().collect_schema()
        for f in self.files:
            part = pl.read_parquet(f)
            part = part.with_columns(pl.col("run_id").replace(self.renames)) if self.renames else part
            yield part.select(pl.col(c).cast(t) if c in part.columns else pl.lit(None, t).alias(c)
                              for c, t in types.items())


def kind_counts(kernels: pl.DataFrame) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Labelled ``kernels`` counted by baseline kind, and by reference kind (kernels, cases, undecided, those that
    overlapped communication)."""
    if kernels.is_empty():
        return {}, {}
    baseline = dict(kernels.group_by("baseline_kind").len().sort("baseline_kind").iter_rows())
    counts = kernels.group_by("reference_kind").agg(
        pl.len().alias("kernels"), pl.col("is_slowdown").sum().alias("cases"),
        pl.col("is_slowdown").null_count().alias("undecided"),
        (pl.col("comm_overlap_ns") > 0).sum().alias("overlapped")).sort("reference_kind")
    return baseline, {kind: {"kernels": int(n), "cases": int(c), "undecided": int(u), "overlapped": int(o)}
                      for kind, n, c, u, o in counts.iter_rows()}


def decided_share(reference: dict[str, dict[str, int]]) -> float | None:
    """Of the kernels that overlapped communication, the share given a label (a case or not: not undecided);
    None where none overlapped."""
    overlapped = sum(k.get("overlapped", 0) for k in reference.values())
    undecided = sum(k.get("undecided", 0) for k in reference.values())
    return round(1 - undecided / overlapped, 4) if overlapped else None


@dataclass
class DetectResult:
    """What `detect` found: per-rank summary, top slowed signatures, one row per compute kernel (``rows``: a
    frame, or :class:`StoredRows` for a run labelled a rank at a time; :attr:`kernels` reads them)."""

    ranks: pl.DataFrame
    top_signatures: pl.DataFrame
    rows: pl.DataFrame | StoredRows
    mode: str
    match_rate: float | None = None
    notes: list[str] = field(default_factory=list)
    metrics_match_rate: float | None = None
    steps: pl.DataFrame = field(default_factory=lambda: schema.empty(schema.STEP_COST))
    # per run: what the cases cost on the critical path of its normal steps (``labelling.replayed``)
    critical: pl.DataFrame = field(default_factory=lambda: schema.empty(schema.CRITICAL))
    # per run: its causes ranked by what they cost a step, and the cases its stragglers caused (analyzers.causes)
    causes: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CAUSES))
    held: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=HELD))

    @property
    def kernels(self) -> pl.DataFrame:
        """One row per compute kernel (read from disk, whole, where they were stored a rank at a time)."""
        return self.rows if isinstance(self.rows, pl.DataFrame) else self.rows.scan().collect()

    @property
    def stored(self) -> bool:
        """Whether the rows are on disk (:class:`StoredRows`), not in memory."""
        return isinstance(self.rows, StoredRows)

    @property
    def source(self) -> LabelSource:
        """Where the labels came from (its sentence says so)."""
        return LabelSource.of(self.mode)

    def compute_kernels(self) -> int:
        """How many compute kernels were labelled."""
        return self.rows.height if isinstance(self.rows, pl.DataFrame) else self.rows.compute_kernels

    def baseline_kinds(self) -> dict[str, int]:
        """How many compute kernels got each kind of baseline (twin, key-median, estimate, none)."""
        return kind_counts(self.rows)[0] if isinstance(self.rows, pl.DataFrame) else self.rows.baseline_kinds

    def reference_kinds(self) -> dict[str, dict[str, int]]:
        """Per reference kind (twin, clean, borrowed, corrected, contaminated, none): the compute kernels judged
        on it, the cases and the undecided among them, and those that overlapped communication."""
        return kind_counts(self.rows)[1] if isinstance(self.rows, pl.DataFrame) else self.rows.reference_kinds

    def cases(self) -> int:
        """How many compute kernels are slowdown cases."""
        if isinstance(self.rows, StoredRows):
            return self.rows.cases
        return int(self.rows["is_slowdown"].sum()) if self.rows.height else 0

    def undecided(self) -> int:
        """How many compute kernels are undecided (``is_slowdown`` null: ``analyzers.detection.labels``)."""
        return sum(k.get("undecided", 0) for k in self.reference_kinds().values())

    def time_lost_ns(self) -> int:
        """The GPU time the cases added, over all ranks."""
        return int(self.ranks["time_lost_ns"].sum()) if self.ranks.height else 0

    def critical_path(self) -> dict[str, Any]:
        """Over the runs replayed: what the cases cost on the critical path of their normal steps
        (``critical_path_ns``), the time they lost in those steps (``critical_lost_ns``) and its share on the
        critical path (``critical_path_share``); None where no run was replayed."""
        if self.critical.is_empty():
            return {"critical_path_ns": None, "critical_lost_ns": None, "critical_path_share": None}
        on, lost = int(self.critical["critical_ns"].sum()), int(self.critical["lost_ns"].sum())
        return {"critical_path_ns": on, "critical_lost_ns": lost,
                "critical_path_share": round(on / lost, 4) if lost else None}

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "baseline_kinds": self.baseline_kinds(),
            "reference_kinds": self.reference_kinds(),
            "baseline_match_rate": None if self.match_rate is None else round(self.match_rate, 4),
            "metrics_match_rate": None if self.metrics_match_rate is None else round(self.metrics_match_rate, 4),
            "ranks": self.ranks.to_dicts(),
            "top_signatures": self.top_signatures.to_dicts(),
            "steps": self.steps.to_dicts(),
            "totals": {
                "compute_kernels": self.compute_kernels(),
                "cases": self.cases(),
                "undecided": self.undecided(),
                "decided_share": decided_share(self.reference_kinds()),
                "time_lost_ns": self.time_lost_ns(),
                **self.critical_path(),
            },
            "critical_path": self.critical.to_dicts(),
            "causes": self.causes.to_dicts(),
            "straggler_cases": self.held.to_dicts(),
            "notes": self.notes,
        }


def empty_result(ranks: pl.DataFrame, note: str) -> DetectResult:
    """The result of a run with nothing to label: its ranks with zeros, no kernels."""
    zeros = [pl.lit(0 if t == pl.Int64 else None, dtype=t).alias(c) for c, t in schema.RANK_SUMMARY.items()]
    return DetectResult(ranks=ranks.select("run_id", "rank", *zeros),
                        top_signatures=schema.empty(schema.TOP_SIGNATURES), rows=schema.empty(schema.CASES),
                        mode=LabelSource.NONE.mode, notes=[note])


def rank_summary(breakdown: pl.DataFrame, labelled: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """The breakdown per rank, its cases and time lost, and that as a share of its normal steps' GPU time
    (of the capture span when the trace has no steps)."""
    return summary_of(breakdown, rank_cases(labelled), steps)


def summary_of(breakdown: pl.DataFrame, cases: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """:func:`rank_summary` from each rank's cases (``traceql.analyzers.cases.rank_cases``), however found."""
    step_time = steps.group_by("run_id", "rank").agg(pl.col("gpu_ns").sum().alias("step_time_ns"))
    ranks = (breakdown.join(cases, on=["run_id", "rank"], how="left", maintain_order="left")
             .join(step_time, on=["run_id", "rank"], how="left", maintain_order="left")
             .with_columns(pl.col("compute_kernels", "cases", "time_lost_ns").fill_null(0),
                           pl.coalesce("step_time_ns", "span_ns").alias("step_time_ns")))
    return ranks.with_columns((100 * pl.col("time_lost_ns") / pl.col("step_time_ns")).round(3).alias("time_lost_pct"))


def _renamed(result: DetectResult, used: set[str]) -> DetectResult:
    """A run whose run id an earlier run has already (two ``x.sqlite`` from two folders) becomes ``x#2``."""
    names: dict[str, str] = {}
    for run_id in result.ranks["run_id"].unique(maintain_order=True).to_list():
        name, n = run_id, 2
        while name in used:
            name, n = f"{run_id}#{n}", n + 1
        used.add(name)
        names[run_id] = name
    if all(k == v for k, v in names.items()):
        return result
    frames = [df.with_columns(pl.col("run_id").replace(names)) if "run_id" in df.columns else df
              for df in (result.ranks, result.top_signatures, result.steps, result.critical, result.causes,
                         result.held)]
    rows = result.rows.with_columns(pl.col("run_id").replace(names)) if isinstance(result.rows, pl.DataFrame) \
        else replace(result.rows, renames={**result.rows.renames, **names})
    return DetectResult(ranks=frames[0], top_signatures=frames[1], rows=rows, mode=result.mode,
                        match_rate=result.match_rate, notes=result.notes,
                        metrics_match_rate=result.metrics_match_rate, steps=frames[2], critical=frames[3],
                        causes=frames[4], held=frames[5])


def _rows(results: list[DetectResult]) -> pl.DataFrame | StoredRows:
    """The results' rows one after another: in memory, or on disk where any was stored (then the others are
    written beside them)."""
    if not any(r.stored for r in results):
        return pl.concat([cast(pl.DataFrame, r.rows) for r in results], how="diagonal_relaxed")  # none stored
    files: list[Path] = []
    holders: list[Any] = []
    renamed: dict[str, str] = {}
    for i, r in enumerate(results):
        if isinstance(r.rows, StoredRows):
            files += r.rows.files
            holders.append(r.rows.holder)
            renamed.update(r.rows.renames)
        else:
            import tempfile

            holders.append(tempfile.TemporaryDirectory(prefix="traceql-rows-"))
            files.append(Path(holders[-1].name) / f"run{i}.parquet")
            r.rows.write_parquet(files[-1])
    baseline, reference = summed_kinds([(r.baseline_kinds(), r.reference_kinds()) for r in results])
    return StoredRows(tuple(files), sum(r.compute_kernels() for r in results), sum(r.cases() for r in results),
                      baseline, reference, renamed, tuple(holders))


def summed_kinds(parts: list[tuple[dict[str, int], dict[str, dict[str, int]]]],
                 ) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """The counts by baseline kind and by reference kind (kernels, cases) of several parts, added up."""
    baseline: dict[str, int] = {}
    reference: dict[str, dict[str, int]] = {}
    for b, ref in parts:
        for k, n in b.items():
            baseline[k] = baseline.get(k, 0) + n
        for k, c in ref.items():
            mine = reference.setdefault(k, {"kernels": 0, "cases": 0, "undecided": 0, "overlapped": 0})
            for what, n in c.items():
                mine[what] = mine.get(what, 0) + n
    return dict(sorted(baseline.items())), dict(sorted(reference.items()))


def _weighted(rates: list[tuple[float | None, int]]) -> float | None:
    known = [(r, n) for r, n in rates if r is not None]
    weight = sum(n for _, n in known)
    return sum(r * n for r, n in known) / weight if weight else None


def merge(results: list[DetectResult], *, top: int = TOP) -> DetectResult:
    """One result from the runs' results, in the order given: ranks, steps and kernels one after another,
    the ``top`` slowed signatures of them all, notes once each. The baseline match rate is weighted by each
    run's compute kernels; the Nsight Compute match rate (a share of the profiled launches, which every run
    is matched with) is their mean."""
    if len(results) == 1:
        return results[0]
    used: set[str] = set()
    results = [_renamed(r, used) for r in results]
    tops = pl.concat([r.top_signatures for r in results], how="diagonal_relaxed")
    tops = tops.sort(["time_lost_ns", "run_id", "signature"], descending=[True, False, False]).head(top)
    metrics = [r.metrics_match_rate for r in results if r.metrics_match_rate is not None]
    notes = list(dict.fromkeys(n for r in results for n in r.notes))
    return DetectResult(
        ranks=pl.concat([r.ranks for r in results], how="diagonal_relaxed"),
        top_signatures=tops,
        rows=_rows(results),
        mode=combine([r.mode for r in results]),
        match_rate=_weighted([(r.match_rate, r.compute_kernels()) for r in results]),
        notes=notes,
        metrics_match_rate=sum(metrics) / len(metrics) if metrics else None,
        steps=pl.concat([r.steps for r in results], how="diagonal_relaxed"),
        critical=pl.concat([r.critical for r in results], how="diagonal_relaxed"),
        causes=pl.concat([r.causes for r in results]),
        held=pl.concat([r.held for r in results]),
    )
