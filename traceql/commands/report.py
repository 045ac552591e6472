"""`traceql report`: one self-contained HTML page of a trace's slowdown labels, or of a dataset."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import polars as pl

from traceql.analyzers import reports
from traceql.analyzers.causes import held_phrase, sentence
from traceql.comms.relation import Collectives, read_runs
from traceql.errors import OptionError
from traceql.export import collectives as comm_section
from traceql.export import figures
from traceql.export.files import atomic_write
from traceql.export.html import figure, frame_table, page, table
from traceql.labelling import options
from traceql.labelling.inputs import Timeline
from traceql.labelling.options import PAIRED_FACTOR
from traceql.labelling.request import request
from traceql.labelling.result import DetectResult
from traceql.model.names import display_name
from traceql.sources.inputs import is_file
from traceql.sources.outputs import check_file_output
from traceql.verdicts.ranks import RanksResult, facts_of, run_steps
from traceql.verdicts.replayed import verdict
from traceql.verdicts.whatif import run_class


@dataclass
class ReportResult:
    """What was written: the page, the step drawn (None without steps), the cases it shows."""

    path: Path
    step: int | None
    cases: int
    kind: str  # "trace" or "dataset"
    notes: list[str] = field(default_factory=list)  # what reading and labelling said (a baseline that fits ill)


def _writer(text: str) -> Callable[[IO[bytes]], None]:
    """What :func:`atomic_write` writes the page with: ``text`` encoded as UTF-8."""
    def write(fh: IO[bytes]) -> None:
        fh.write(text.encode())

    return write


def _check_output(output: Path) -> Path:
    if output.suffix.lower() not in (".html", ".htm"):
        raise OptionError(f"--output {output}: a report is an .html file")
    return output


def report(paths: str | Path | Sequence[str | Path] | None = None, *, output: str | Path,
           baseline: Sequence[str | Path] | None = None, step: int | None = None,
           threshold: float = PAIRED_FACTOR, single_trace: bool = False) -> ReportResult:
    """Write a report of a trace (labelled as `detect` labels it) or of a dataset folder to ``output``.

    Args:
        paths: the trace files or folders (none: the embedded example), or one dataset folder.
        output: the page to write (``.html`` or ``.htm``), atomically; not an input.
        baseline: isolated runs of the same model and shapes to label against (as ``detect``'s).
        step: the normal step whose timeline is drawn; None: the one with the most time lost (the first
            captured one left out where there are others).
        threshold: a case is an overlapped kernel at least this many times its baseline (above 1.0).
        single_trace: label by the detector even where the trace has isolated steps.

    Returns:
        The page written, the step drawn (None without steps), the cases it shows, its kind (``trace`` or
        ``dataset``) and notes.

    Raises:
        OptionError: for an ``output`` that is no ``.html`` file or is an input, a bad ``threshold``, or a
            ``step`` the trace has no normal step of.
    """
    output = _check_output(Path(output))
    options.threshold(threshold)
    single = Path(paths) if isinstance(paths, (str, Path)) else (Path(paths[0]) if paths and len(paths) == 1 else None)
    if single is not None and is_file(single / "dataset.json"):
        return _dataset_report(single, check_file_output(output, "--output", [single]))
    req = request(paths, baseline=baseline, threshold=threshold, single_trace=single_trace,
                  outputs={"--output": output})
    timeline, result = req.label_all()
    result.notes = list(dict.fromkeys([*req.notes(), *result.notes]))
    html_text, drawn = _trace_page(timeline, result, step, threshold, read_runs(req.runs()))
    atomic_write(output, _writer(html_text))
    return ReportResult(output, drawn, result.cases(), "trace", result.notes)


def _trace_page(timeline: Timeline, result: DetectResult, step: int | None, threshold: float,
                comms: Collectives) -> tuple[str, int | None]:
    k = result.kernels
    cost = result.steps
    drawn = step if step is not None else reports.busiest_step(cost)
    if step is not None and (cost.is_empty() or step not in cost["step"].to_list()):
        raise OptionError(f"--step {step}: the trace has no normal step {step} "
                                  f"(its steps: {', '.join(map(str, sorted(set(cost['step'].to_list())))) or 'none'})")
    ranked = run_steps(timeline, result)  # the causes and the replay they come from (`ranks`, `whatif`)
    result.notes[:] = list(dict.fromkeys([*result.notes, *ranked.notes]))  # the clocks', as every command says
    sections = [("Causes, largest first", _causes(ranked.causes, ranked.unaligned)), ("Per rank", _rank_table(result))]
    if drawn is not None:
        chosen = "the step with the most time lost" if step is None else "the step asked for"
        first = cost["step"].min()
        if step is None and drawn == first:
            chosen += ": the first captured, the only one"
        apart = bool(ranked.unaligned)
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
    if cost.height and cost["step"].n_unique() > 1:
        sections.append(("Time lost per normal step", figure(figures.lost_per_step(cost))
                         + "<p class='note'>Summed over the ranks; the first captured step is left out, as from "
                           "every total (each rank's capture began at its own moment).</p>"))
    if cost.height:
        sections.append(("What if: what each cause costs a step", _whatif(timeline, ranked)))
    runs = timeline.kernels["run_id"].unique(maintain_order=True).to_list()
    firsts = dict(cost.group_by("run_id").agg(pl.col("step").min()).iter_rows()) if cost.height else {}
    sections.append(("Collectives", comm_section.section(comms.rows, runs, firsts, comms.notes)))
    if result.ranks.height:
        sections.append(("Time breakdown", figure(figures.rank_breakdown(result.ranks))))
    subtitle = (f"{result.source.sentence} · {result.cases():,} slowdown cases among {k.height:,} compute "
                f"kernels · time lost {result.time_lost_ns() / 1e6:,.3f} ms over all ranks{held_phrase(ranked.held)}")
    title = f"Slowdown report: {', '.join(runs)}"
    return page(title, subtitle, sections, result.notes, lead=_lead(ranked.causes)), drawn


def _lead(causes: pl.DataFrame) -> str:
    """The page's first line: each run's largest cause and what it costs."""
    tops = [row for (_,), part in causes.group_by("run_id", maintain_order=True) for row in part.head(1).to_dicts()]
    if not tops:
        return ""
    many = len(tops) > 1
    return "; ".join(f"{row['run_id'] + ': l' if many else 'L'}argest cause: {sentence(row)}" for row in tops)


def _causes(causes: pl.DataFrame, unaligned: list[str]) -> str:
    """Each run's causes, largest first, as `detect`, `ranks` and `whatif` print them."""
    parts = [f"<p><b>{html.escape(run)}</b>: its ranks' clocks disagree: no cause is priced (a replay joins the "
             "ranks at their collectives).</p>" for run in unaligned]
    for (run_id,), part in causes.group_by("run_id", maintain_order=True):
        items = "".join(f"<li>{html.escape(sentence(row))}</li>" for row in part.to_dicts())
        parts.append(f"<p><b>{html.escape(run_id)}</b></p><ol>{items}</ol>")
    if not parts:
        return "<p>No step to price (no step ranges, or no GPU activity).</p>"
    return "".join(parts) + ("<p class='note'>Each: what a normal step (the first captured left out) would be "
                             "shorter without it, replayed (traceql whatif): a cost on the critical path, not "
                             "the time it took (communication exposed while another rank or the CPU holds the "
                             "step costs nothing); priced one at a time, so they overlap. A straggler's cost "
                             "holds the slowdowns of the ranks that waited for it.</p>")


def _whatif(timeline: Timeline, ranked: RanksResult) -> str:
    """What each cause saves a step, from the replay (`traceql whatif`), and each run's verdict."""
    if ranked.replayed is None:
        return "<p>Not replayed: the ranks' clocks disagree (see the notes).</p>"
    done = ranked.replayed
    cls = run_class(facts_of(timeline), ranked)
    verdicts = []
    for run_id in done.steps["run_id"].unique(maintain_order=True).to_list():
        mine = done.steps.filter(pl.col("run_id") == run_id)
        ranks = timeline.ranks.filter(pl.col("run_id") == run_id).height
        comm = bool(timeline.kernels.filter((pl.col("run_id") == run_id) & (pl.col("kind") == "comm")).height)
        v = verdict(run_id, mine, ranks, comm, cls, late=ranked.late)
        verdicts.append(f"<p><b>{html.escape(run_id)}</b>: {html.escape(v.text)}.</p>")
    drawn = figure(figures.whatif_savings(done.steps)) if not done.steps.filter(~pl.col("first")).is_empty() else ""
    return (drawn + "".join(verdicts)
            + "<p class='note'>A replay of the run from what each GPU activity and CPU launch waited for; each "
              "what-if replays one step at a time, the rest as it ran. Bars: what each normal step would save "
              "without each cause (from 0); overlap: what running communication beside computation saves against "
              "serializing it (below 0 where it costs). The first captured step is left out.</p>")


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
                 numeric=[False, False, True, True, True, False], whole=["grid / block", "next to"])


def _dataset_report(root: Path, output: Path) -> ReportResult:
    from traceql.dataset.summary import summary

    df = summary(root)
    sections = [("Summary", frame_table(df)), ("Cases and time lost", figure(figures.dataset_cases(df)))]
    text = page(f"Slowdown dataset: {root}", f"{df.height} model / configuration groups", sections)
    atomic_write(output, _writer(text))
    return ReportResult(output, None, int(df["cases"].sum()), "dataset")
