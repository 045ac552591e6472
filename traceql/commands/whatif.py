"""`traceql whatif`: what each cause costs in step time, from a replay of the run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from traceql.labelling.options import PAIRED_FACTOR
from traceql.labelling.request import request
from traceql.verdicts.whatif import RunVerdict, WhatIfResult, what_if

__all__ = ["RunVerdict", "WhatIfResult", "whatif"]


def whatif(
    paths: str | Path | Sequence[str | Path] | None = None,
    *,
    baseline: Sequence[str | Path] | None = None,
    threshold: float = PAIRED_FACTOR,
    bucket_cap: float | None = None,
    gradients: str | Path | None = None,
) -> WhatIfResult:
    """Replay every run of a trace from what its GPU activity and CPU launches waited for
    (``traceql.analyzers.replay``), and each normal step again without its slowdown cases (labelled as `detect`
    labels them: against ``baseline``, the trace's isolated steps, or the detector), without its straggler
    (named as `ranks` names it), and with communication serialized after computation. With no paths, the
    embedded example. Runs given together are each taken on their own. With ``bucket_cap`` (MB), each step
    also with DDP's gradient buckets at that cap (the model's gradient sizes: the run folder's, or
    ``gradients``, a JSON file; docs/commands/whatif.md).

    Args:
        paths: the trace files or folders (none: the embedded example).
        baseline: isolated runs of the same model and shapes to label against (as ``detect``'s); with neither
            this nor ``paths``, the embedded example's isolated run.
        threshold: a case is an overlapped kernel at least this many times its baseline (above 1.0).
        bucket_cap: a DDP ``bucket_cap_mb`` (MB) to replay each step with as well; None: not.
        gradients: the model's gradient sizes for ``bucket_cap`` (JSON: ``param_bytes``, ``bucket_cap_mb``)
            where the run folder records none.

    Each run's steps, stragglers and replay are kept in the cache folder and served to the same call on the
    same unchanged files (``traceql.labelling.memo``; ``TRACEQL_NO_RESULT_CACHE=1`` computes every time).

    Returns:
        Every normal step of each run, measured, replayed and replayed without each cause, and per run its
        verdict: its causes ranked by what they cost a step.
    """
    also = [gradients] if gradients is not None else []
    req = request(paths, baseline=baseline, threshold=threshold, also=also)
    return what_if(req, bucket_cap=bucket_cap, gradients=Path(gradients) if gradients is not None else None)
