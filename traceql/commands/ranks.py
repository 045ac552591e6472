"""`traceql ranks`: every step of every rank (where its time went, its slowdowns) and the stragglers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from traceql.labelling.options import PAIRED_FACTOR
from traceql.labelling.request import request
from traceql.verdicts.ranks import RanksResult, rank_steps

__all__ = ["RanksResult", "ranks"]


def ranks(
    paths: str | Path | Sequence[str | Path] | None = None,
    *,
    baseline: Sequence[str | Path] | None = None,
    threshold: float = PAIRED_FACTOR,
    hta_compat: bool = False,
) -> RanksResult:
    """Every normal step of every rank of a trace: its CPU and GPU time, compute, communication, memory, idle
    and exposed communication (``traceql.analyzers.step_breakdown``), its slowdown cases and time lost (labelled as
    `detect` labels them: against ``baseline``, the trace's isolated steps, or the detector); and the
    stragglers (``traceql.analyzers.stragglers``). With no paths, the embedded example. Runs given together
    are each taken on their own.

    Args:
        paths: the trace files or folders (none: the embedded example).
        baseline: isolated runs of the same model and shapes to label against (as ``detect``'s); with neither
            this nor ``paths``, the embedded example's isolated run.
        threshold: a case is an overlapped kernel at least this many times its baseline (above 1.0).
        hta_compat: compute the per-rank breakdown as Holistic Trace Analysis 0.5.0 does.

    Each run's steps, stragglers and replay are kept in the cache folder and served to the same call on the
    same unchanged files (``traceql.labelling.memo``; ``TRACEQL_NO_RESULT_CACHE=1`` computes every time).

    Returns:
        Every step of every rank (``steps``), the stragglers and what each cost its step, the causes ranked by
        what they cost a step, the stragglers' own cases (``held``), the per-rank breakdown and notes.
    """
    return rank_steps(request(paths, baseline=baseline, threshold=threshold, hta_compat=hta_compat))
