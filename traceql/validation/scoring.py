"""Labels scored against the matrix's twin labels: precision, recall, F1, and the time they say was lost.

The truth of a stock run is its twin labels (``detect STOCK --baseline TWIN``), shipped as parquet. A kernel is
*judged* when it has a twin and runs in a normal step (isolated steps and kernels only DDP runs, such as its
bucket copies, are not cases either way).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceql.analyzers.baselines.kinds import TWIN
from traceql.analyzers.detection.threshold import PAIRED_FACTOR
from traceql.validation.matrix import MatrixRun

KEY = ["rank", "stream", "start_ns"]
KEEP = ["run_id", "rank", "device", "stream", "start_ns", "end_ns", "duration_ns", "short_name", "step", "step_kind",
        "comm_overlap_ns", "baseline_ns", "reference_kind", "slowdown_ratio", "is_slowdown"]
NEAR = 0.03  # kernels whose true ratio lies within 3 % of the threshold: a coin toss for any estimate


def twin_labels(stock: MatrixRun, twin: MatrixRun | None) -> pl.DataFrame:
    """The stock run's compute kernels labelled against its isolated twin (``KEEP`` columns)."""
    from traceql.commands.detect import detect

    if twin is None:
        raise ValueError(f"{stock.name}: no isolated twin in the matrix")
    kernels = detect(stock.path(), baseline=[twin.path()]).kernels
    return kernels.select(KEEP).with_columns(pl.col("short_name").cast(pl.String))


def write_labels(frame: pl.DataFrame, path: Path) -> None:
    """``frame`` as parquet at ``path``, atomically."""
    from traceql.export.files import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    frame.write_parquet(buf, compression="zstd", compression_level=19)
    atomic_write(path, lambda fh: fh.write(buf.getvalue()))


def judged(truth: pl.DataFrame) -> pl.Series:
    """The kernels the twin labels judge: with a twin, in a normal step (every step where none is marked)."""
    normal = truth["step_kind"] == "sync"
    normal = normal.fill_null(False) if normal.any() else pl.Series([True] * truth.height)
    return normal & (truth["reference_kind"] == TWIN)


@dataclass(frozen=True)
class Score:
    """Labels against the truth: counts, P/R/F1, the same without the kernels near the threshold, and the time
    lost the labels claim against the twins' excess."""

    truth: int
    cases: int
    tp: int
    precision: float
    recall: float
    f1: float
    f1_far: float
    lost_ns: int
    true_lost_ns: int

    @property
    def lost_ratio(self) -> float:
        return self.lost_ns / self.true_lost_ns if self.true_lost_ns else float("nan")


def prf(pred: pl.Series, truth: pl.Series) -> tuple[float, float, float, int]:
    tp, fp, fn = int((pred & truth).sum()), int((pred & ~truth).sum()), int((~pred & truth).sum())
    p = tp / (tp + fp) if tp + fp else (1.0 if not fn else 0.0)
    r = tp / (tp + fn) if tp + fn else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0), tp


def score(labels: pl.DataFrame, truth: pl.DataFrame, threshold: float = PAIRED_FACTOR) -> Score:
    """``labels`` (`detect`'s kernels: ``is_slowdown``, ``baseline_ns``) against ``truth`` (twin labels)."""
    t = truth.with_columns(judged(truth).alias("_judged")).filter(pl.col("_judged"))
    on = t.select(*KEY, pl.col("is_slowdown").alias("_gt"), pl.col("slowdown_ratio").alias("_ratio"),
                  (pl.col("duration_ns") - pl.col("baseline_ns")).alias("_excess")).join(
        labels.select(*KEY, pl.col("is_slowdown").fill_null(False).alias("_pred"),
                      (pl.col("duration_ns") - pl.col("baseline_ns")).alias("_claimed")),
        on=KEY, how="left").with_columns(pl.col("_pred").fill_null(False))
    p, r, f, tp = prf(on["_pred"], on["_gt"])
    far = on.filter(((pl.col("_ratio") / threshold - 1).abs() > NEAR).fill_null(True))
    lost = int(on.filter(pl.col("_pred"))["_claimed"].fill_null(0).clip(lower_bound=0).sum())
    true_lost = int(on.filter(pl.col("_gt"))["_excess"].clip(lower_bound=0).sum())
    return Score(int(on["_gt"].sum()), int(on["_pred"].sum()), tp, p, r, f, prf(far["_pred"], far["_gt"])[2],
                 lost, true_lost)


def on_decided(labels: pl.DataFrame, truth: pl.DataFrame) -> tuple[float, float, float]:
    """F1 and precision of ``labels`` on the kernels they decided (``is_slowdown`` not null: an undecided kernel,
    overlapped with no reference or a contaminated one, is neither a case nor known not to be one), and the share
    of the judged kernels that they decided."""
    decided = labels.filter(pl.col("is_slowdown").is_not_null()).select(KEY)
    judged_ = truth.filter(judged(truth)).select(KEY)
    mine = truth.join(decided, on=KEY, how="semi")
    s = score(labels.join(decided, on=KEY, how="semi"), mine)
    share = judged_.join(decided, on=KEY, how="semi").height / judged_.height if judged_.height else 1.0
    return s.f1, s.precision, share


def detector_labels(run: MatrixRun, band: float, contamination: float, margin: float = 0.01, *,
                    factors: pl.DataFrame | None = None) -> pl.DataFrame:
    """The single-trace detector's labels of a stock run (its isolated steps hidden), at these settings, its
    estimates corrected by ``factors`` (``baselines.learned``; None: the shipped ones)."""
    from traceql.analyzers.detection.detector import SlowdownDetector
    from traceql.commands.detect import detect

    det = SlowdownDetector(band=band, contamination=contamination, margin=margin, estimate_factors=factors)
    return detect(run.path(), single_trace=True, detector=det).kernels


def inrun_labels(run: MatrixRun) -> pl.DataFrame | None:
    """The in-run labels of a stock run (its isolated steps the reference); None where `detect` would not
    take them as a reference."""
    from traceql.commands.detect import detect

    kernels = detect(run.path()).kernels
    return kernels if kernels.height and kernels["label_source"][0] == "inrun" else None
