"""Which label source applies to a run, and the words that say so.

Against an isolated run given as baseline (paired labels); else against the trace's own isolated steps
(``step_<i>_nosync``, run with communication off: in-run labels); else by the single-trace detector. Runs
given together may mix the last two. Each kernel's row says its own (``label_source``).
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line imports this module: polars only where a trace is read
    import polars as pl


class LabelSource(Enum):
    """A run's label source: its value is the ``mode`` of JSON outputs, its sentence what the report and the
    terminal say, its short form what `diff` says of each side."""

    BASELINE = ("baseline", "paired labels, against the isolated run given", "baseline labels")
    INRUN = ("inrun", "in-run labels, against the trace's own isolated steps", "in-run labels")
    MIXED = ("inrun+detector", "in-run labels for runs with isolated steps, the detector's for the others",
             "in-run and detector labels")
    DETECTOR = ("detector", "single-trace labels, by the detector (no reference)", "detector labels")
    NONE = ("none", "no GPU kernels", "no kernels")

    def __init__(self, mode: str, sentence: str, short: str) -> None:
        self.mode = mode
        self.sentence = sentence
        self.short = short

    @classmethod
    def of(cls, mode: str) -> LabelSource:
        """The source whose mode is ``mode``."""
        return next(s for s in cls if s.mode == mode)


def choose(*, has_baseline: bool, has_isolated_steps: bool, single_trace: bool) -> LabelSource:
    """The source a run's labels come from: the baseline given, its isolated steps (unless ``single_trace``
    hides them from the detector), or the detector."""
    if has_baseline:
        return LabelSource.BASELINE
    if has_isolated_steps and not single_trace:
        return LabelSource.INRUN
    return LabelSource.DETECTOR


def combine(modes: list[str]) -> str:
    """One mode for the runs of a result: the one they share, else baseline where any has it, else mixed."""
    labelled = {m for m in modes if m != LabelSource.NONE.mode}
    if not labelled:
        return LabelSource.NONE.mode
    if len(labelled) == 1:
        return labelled.pop()
    return LabelSource.BASELINE.mode if LabelSource.BASELINE.mode in labelled else LabelSource.MIXED.mode


def divided(estimates: pl.DataFrame, factors: pl.DataFrame) -> bool:
    """Whether ``factors`` divide any of ``estimates`` (rows with ``key`` and ``reference_kind``): a run with no
    estimate of a kind and kernel they hold (no communication, say) has nothing divided."""
    from traceql.analyzers.baselines.learned import factor_of

    if factors.is_empty():
        return False
    pairs = estimates.select("key", "reference_kind").unique()  # a kernel's factor is its (key, kind)'s
    return bool((factor_of(pairs, factors) != 1.0).any())


def factor_notes(factors: pl.DataFrame, source: LabelSource, used: bool = True) -> list[str]:
    """What labels from ``source`` say of the learned ``factors`` their estimates were divided by: one note where
    the detector labelled and they divided an estimate (``used``: :func:`divided`;
    ``baselines.learned.applied``)."""
    from traceql.analyzers.baselines.learned import applied

    said = applied(factors) if used and source in (LabelSource.DETECTOR, LabelSource.MIXED) else None
    return [said] if said else []
