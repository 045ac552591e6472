"""`traceql report`: one self-contained HTML page of a trace's slowdown labels, or of a dataset."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from traceql.analyzers import reports
from traceql.errors import OptionError
from traceql.export import figures
from traceql.export.files import atomic_write
from traceql.export.html import figure, frame_table, page, table
from traceql.labelling import options
from traceql.labelling.inputs import Timeline
from traceql.labelling.options import PAIRED_FACTOR
from traceql.labelling.replayed import replayed, verdict
from traceql.labelling.request import request
from traceql.labelling.result import DetectResult
from traceql.labelling.steps import clocks_disagree, run_steps
from traceql.labelling.whatif import run_errors
from traceql.model.names import display_name
from traceql.sources.inputs import is_file
from traceql.sources.outputs import check_file_output


@dataclass
class ReportResult:
    """What was written: the page, the step drawn (None without steps), the cases it shows."""

    path: Path
    step: int | None
    cases: int
    kind: str  # "trace" or "dataset"
    notes: list[str] = field(default_factory=list)  # what reading and labelling said (a baseline that fits ill)


def _check_output(output: Path) -> Path:
    if output.suffix.lower() not in (".html", ".htm"):
        raise OptionError(f"--output {output}: a report is an .html file")
    return output


def report(paths: str | Path | Sequence[str | Path] | None = None, *, output: str | Path,
           baseline: Sequence[str | Path] | None = None, step: int | None = None,
           threshold: float = PAIRED_FACTOR, single_trace: bool = False) -> ReportResult:
    """Write a report of a trace (labelled as `detect` labels it) or of a dataset folder to ``output``."""
    output = _check_output(Path(output))
    options.threshold(threshold)
    single = Path(paths) if isinstance(paths, (str, Path)) else (Path(paths[0]) if paths and len(paths) == 1 else None)
    if single is not None and is_file(single / "dataset.json"):
        return _dataset_report(single, check_file_output(output, "--output", [single]))
    req = request(paths, baseline=baseline, threshold=threshold, single_trace=single_trace,
                  outputs={"--output": output})
    timeline, result = req.label_all()
    html_text, drawn = _trace_page(timeline, result, step, threshold)
    atomic_write(output, lambda fh: fh.write(html_text.encode()))
    return ReportResult(output, drawn, result.cases(), "trace", result.notes)


def _trace_page(timeline: Timeline, result: DetectResult, step: int | None, threshold: float) -> tuple[str, int | None]:
    k = result.kernels
    cost = result.steps
    drawn = step if step is not None else reports.busiest_step(cost)
    if step is not None and (cost.is_empty() or step not in cost["step"].to_list()):
        raise OptionError(f"--step {step}: the trace has no normal step {step} "
                                  f"(its steps: {', '.join(map(str, sorted(set(cost['step'].to_list())))) or 'none'})")
    sections = [("Per rank", _rank_table(result))]
    if drawn is not None:
        chosen = "the step with the most time lost" if step is None else "the step asked for"
        first = cost["step"].min()
        if step is None and drawn == first:
            chosen += ": the first captured, the only one"
        apart = bool(clocks_disagree(timeline))
        frame = reports.step_timeline(k, timeline.kernels, timeline.memops, drawn, timeline.ranks, own_clocks=apart)
        axis = ("The ranks' clocks disagree (see the notes): each rank is drawn from its own first start of the "
                "step, so the rows do not line up in time." if apart else
                "The ranks share one time axis (their clocks put on the run's one clock).")
        drawing = figure(figures.step_timeline(frame, drawn, own_clocks=apart))
        sections.append((f"Timeline of step {drawn} ({chosen})", drawing
                         + "<p class='note'>Slowed kernels in red; hover a kernel for its ratio, baseline and the "
                           f"collective it ran next to. {axis} Zoom with the mouse; double-click to reset. The first "
                           "captured step (each rank's capture began at its own moment) is drawn only when asked "
                           "for (--step).</p>"))
    else:
        sections.append(("Timeline", "<p class='note'>No timeline: the trace has no step ranges (NVTX "
                                     "<code>step_&lt;i&gt;</code> or Kineto <code>ProfilerStep#&lt;i&gt;</code>) to "
                                     "draw one step of.</p>"))
    sections.append(("Top slowed kernels", _top_table(result)))
    ratios = reports.ratio_distribution(k) if k.height else pl.DataFrame()
    if ratios.height:
        sections.append(("Slowdown ratios", figure(figures.ratio_histogram(ratios, threshold))))
    if cost.height:
        sections.append(("Time lost per step", figure(figures.lost_per_step(cost))))
        sections.append(("What if: each cause's cost in step time", _whatif(timeline, result)))
    if result.ranks.height:
        sections.append(("Time breakdown", figure(figures.rank_breakdown(result.ranks))))
    subtitle = (f"{result.source.sentence} · {result.cases():,} slowdown cases among {k.height:,} compute "
                f"kernels · time lost {result.time_lost_ns() / 1e6:,.3f} ms over all ranks")
    runs = ", ".join(timeline.kernels["run_id"].unique(maintain_order=True).to_list())
    return page(f"Slowdown report: {runs}", subtitle, sections, result.notes), drawn


def _whatif(timeline: Timeline, result: DetectResult) -> str:
    """The steps replayed as they ran and without each cause (`traceql whatif`), and each run's verdict."""
    ranked = run_steps(timeline, result)
    done = ranked.replayed or replayed(timeline, result)
    bounds = run_errors(timeline, ranked)
    verdicts = []
    for run_id in done.steps["run_id"].unique(maintain_order=True).to_list():
        mine = done.steps.filter(pl.col("run_id") == run_id)
        ranks = timeline.ranks.filter(pl.col("run_id") == run_id).height
        comm = bool(timeline.kernels.filter((pl.col("run_id") == run_id) & (pl.col("kind") == "comm")).height)
        v = verdict(run_id, mine, ranks, comm, bounds)
        verdicts.append(f"<p><b>{html.escape(run_id)}</b>: {html.escape(v.text)}.</p>")
    return (figure(figures.whatif_steps(done.steps)) + "".join(verdicts)
            + "<p class='note'>A replay of the run from what each GPU activity and CPU launch waited for; each "
              "what-if replays one step at a time, the rest as it ran. * the first captured step: shown, not "
              "judged.</p>")


def _rank_table(result: DetectResult) -> str:
    rows = [[x["run_id"], x["rank"], "-" if x["comm_comp_overlap_pct"] is None else f"{x['comm_comp_overlap_pct']:.2f}",
             *(f"{x[c] / 1e6:,.3f}" for c in ("compute_ns", "non_compute_ns", "idle_ns", "span_ns", "comm_ns")),
             f"{x['cases']:,}", f"{x['time_lost_ns'] / 1e6:,.3f}",
             "-" if x["time_lost_pct"] is None else f"{x['time_lost_pct']:.2f}"]
            for x in result.ranks.iter_rows(named=True)]
    header = ["run", "rank", "overlap %", "compute ms", "other ms", "idle ms", "span ms", "comm ms", "cases",
              "time lost ms", "lost % of step time"]
    return (table(rows, header, numeric=[False, True, True, True, True, True, True, True, True, True, True])
            + "<p class='note'>compute + other + idle = span; other: communication and memory operations with no "
              "compute kernel running; comm: all communication time, beside compute or not.</p>")


def _top_table(result: DetectResult) -> str:
    t = result.top_signatures
    if t.is_empty():
        return "<p>No slowdown cases.</p>"
    rows = [[display_name(x["name"], x["short_name"]), x["signature"][len(x["short_name"]):].strip(),
             f"{x['cases']:,} / {x['instances']:,}", f"{x['median_ratio']:.2f}x", f"{x['time_lost_ns'] / 1e6:,.3f}",
             x["concurrent_comm"] or "-"] for x in t.iter_rows(named=True)]
    return table(rows, ["kernel", "grid / block", "cases / instances", "median ratio", "time lost ms", "next to"],
                 numeric=[False, False, True, True, True, False])


def _dataset_report(root: Path, output: Path) -> ReportResult:
    from traceql.dataset.summary import summary

    df = summary(root)
    sections = [("Summary", frame_table(df)), ("Cases and time lost", figure(figures.dataset_cases(df)))]
    text = page(f"Slowdown dataset: {root}", f"{df.height} model / configuration groups", sections)
    atomic_write(output, lambda fh: fh.write(text.encode()))
    return ReportResult(output, None, int(df["cases"].sum()), "dataset")
