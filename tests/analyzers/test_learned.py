"""The within-trace estimates' learned factors: how they are learned, that the shipped ones are the validation's,
and that `detect` divides a real run's estimates by them (never below what the overlap allows)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import polars as pl

from traceql.analyzers.baselines.learned import (
    ESTIMATED,
    FACTORS,
    MIN_MODELS,
    SCALED,
    chosen,
    empty,
    families,
    learn,
    learned_on,
    shipped,
)
from traceql.analyzers.detection.detector import SlowdownDetector
from traceql.commands.detect import detect
from traceql.model.names import identity
from traceql.trace import read_trace
from traceql.validation import load_matrix, scoring

MATRIX = load_matrix()
ROOT = Path(__file__).resolve().parents[2]


def _rows(model: str, kind: str, ident: str, ratios: list[float]) -> list[dict]:
    return [{"model": model, "reference_kind": kind, "identity": ident, "estimate_ns": 1000.0 * r, "twin_ns": 1000.0}
            for r in ratios]


def test_a_factor_is_the_median_of_each_model_s_median_where_models_agree_to_have_one() -> None:
    rows = pl.DataFrame([*_rows("a", "borrowed", "k", [0.8, 0.9, 0.95]), *_rows("b", "borrowed", "k", [0.85]),
                         *_rows("c", "borrowed", "k", [1.0, 1.1]), *_rows("a", "borrowed", "only-a", [0.5, 0.5]),
                         *_rows("a", "clean", "x", [1.01]), *_rows("b", "clean", "y", [0.99, 1.03]),
                         *_rows("a", "twin", "k", [2.0]), *_rows("b", "twin", "k", [2.0])])
    got = {(k, i): (f, m) for k, i, f, m in learn(rows, kinds=ESTIMATED).iter_rows()}
    assert learn(rows).is_empty()  # by default contaminated estimates alone: none here
    per_model = [statistics.median([0.8, 0.9, 0.95]), 0.85, statistics.median([1.0, 1.1])]
    assert got[("borrowed", "k")] == (statistics.median(per_model), 3)
    assert ("borrowed", "only-a") not in got  # one model alone: no factor
    assert got[("clean", None)] == (statistics.median([1.01, statistics.median([0.99, 1.03])]), 2)  # one for all
    assert not any(k == "twin" for k, _ in got)  # a twin is the truth, not an estimate


def test_the_shipped_factors_are_the_validation_s_learned_from_every_model() -> None:
    figures = json.loads((MATRIX.root / "validation.json").read_text())["factors"]
    shipped_rows = json.loads(FACTORS.read_text())["factors"]
    assert [[k, i, round(f, 4), m] for k, i, f, m in figures["all"]] == shipped_rows
    table = shipped()
    assert table.height == len(shipped_rows) > 0
    # contaminated estimates alone: the kind whose factors cost no family held out F1 (docs/validation.md)
    assert set(table["reference_kind"]) == set(SCALED) == {"contaminated"}
    assert int(table["models"].min()) >= MIN_MODELS and table["identity"].null_count() == 0
    assert (table["factor"] > 0).all() and table["factor"].is_finite().all()
    assert table["factor"].median() > 1.0  # an overlapped shortest instance is long: divided, it shortens
    assert set(families()) >= {"gpt2", "llama", "bert", "vit", "resnet50"}


def test_detect_divides_a_run_s_estimates_by_their_factor() -> None:
    run = MATRIX.run("vit-2g-cap2-stock", "h100-a")
    plain = scoring.detector_labels(run, 1.2, 0.1, factors=empty())
    learned = scoring.detector_labels(run, 1.2, 0.1)
    assert plain.height == learned.height
    names = plain.select(pl.col("name").cast(pl.String)).unique()
    names = names.with_columns(pl.Series("identity", [identity(n) for n in names["name"]], pl.String))
    table = shipped()
    per_kind = table.select("reference_kind", "identity", "factor")
    both = (plain.select(pl.col("name").cast(pl.String), "reference_kind", "duration_ns", "comm_overlap_ns",
                         pl.col("baseline_ns").alias("before"))
            .with_columns(learned["baseline_ns"].alias("after"))
            .join(names, on="name", how="left", maintain_order="left")
            .join(per_kind, on=["reference_kind", "identity"], how="left", maintain_order="left")
            .with_columns(pl.col("factor").fill_null(1.0)))
    least = (pl.col("duration_ns") - pl.col("comm_overlap_ns")).cast(pl.Float64)
    unbounded = (pl.col("comm_overlap_ns") == 0) | ((pl.col("before") > least)
                                                   & (pl.col("before") / pl.col("factor") > least))
    free = both.filter(pl.col("before").is_not_null() & unbounded)
    assert free.filter(pl.col("factor") != 1.0).height > 100  # vit's contaminated reductions
    assert ((free["after"] - free["before"] / free["factor"]).abs() < 1e-6 * free["before"]).all()
    bound = both.filter((pl.col("comm_overlap_ns") > 0) & pl.col("after").is_not_null())
    assert (bound["after"] >= bound["duration_ns"] - bound["comm_overlap_ns"]).all()  # the overlap still bounds it


def test_detect_s_page_counts_the_shipped_factors() -> None:
    page = (ROOT / "docs/commands/detect.md").read_text()
    assert f"{shipped().height} factors" in " ".join(page.split())


def test_the_factors_hold_only_on_the_gpus_they_were_learned_on() -> None:
    """An H200 run (the shipped 4-GPU GPT-2) keeps its estimates: the matrix measured H100s alone."""
    assert learned_on() == ["H100"]
    table = shipped()
    assert chosen(None, ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]).equals(table)
    for names in (["NVIDIA H200"], ["NVIDIA H100 80GB HBM3", None], [], ["AMD Instinct MI300X"]):
        assert chosen(None, names).is_empty()
    assert chosen(table.head(1), ["NVIDIA H200"]).equals(table.head(1))  # a table the caller chose holds anywhere
    run = ROOT / "datasets/runs/gpt2-4rank-cap2-nsys"
    with read_trace(run) as trace:
        assert set(trace.relation("gpus")["name"]) == {"NVIDIA H200"}
    plain = detect(run, single_trace=True, detector=SlowdownDetector(estimate_factors=empty())).kernels
    default = detect(run, single_trace=True).kernels
    assert default["baseline_ns"].equals(plain["baseline_ns"]) and default["is_slowdown"].equals(plain["is_slowdown"])


def test_detect_says_when_and_which_factors_corrected_its_estimates() -> None:
    """One note, in the text and the JSON: the detector's labels on an H100 run used the shipped factors (which
    kinds, learned on which families and GPUs); paired labels, or an H200 run, used none and say nothing; given
    factors are named where they divided an estimate, and not where none of their kernels ran."""
    run = MATRIX.run("vit-2g-cap2-stock", "h100-a")
    said = [n for n in detect(run.path(), single_trace=True).notes if "factors" in n]
    assert said == [f"note: contaminated estimates divided by factors learned on {len(families())} model families "
                    f"({', '.join(families())}) on H100"]
    assert not [n for n in detect(run.path()).notes if "factors" in n]  # in-run labels: no estimate
    h200 = ROOT / "datasets/runs/gpt2-4rank-cap2-nsys"
    assert not [n for n in detect(h200, single_trace=True).notes if "factors" in n]
    ran = shipped().filter(pl.col("identity").str.contains("layer_norm_grad_input|reduce_kernel 512 1"))
    mine = detect(run.path(), single_trace=True, detector=SlowdownDetector(estimate_factors=ran))
    given = [n for n in mine.notes if "factors" in n]
    assert ran.height == 2 and given == ["note: contaminated estimates divided by the given factors (2)"]
    none_ran = shipped().filter(pl.col("identity").str.contains("arange|embedding_backward"))  # no such kernel
    unused = detect(run.path(), single_trace=True, detector=SlowdownDetector(estimate_factors=none_ran))
    assert none_ran.height == 2 and not [n for n in unused.notes if "factors" in n]


def test_the_note_needs_an_estimate_the_factors_divided() -> None:
    """An H100 run with nothing to divide (the ViT twin: one GPU, no communication, so no contaminated
    estimate) says nothing of factors, read whole or a rank at a time; the stock run's note is the same both
    ways (the rank-at-a-time path asks each shard whether its factors divided an estimate)."""
    from traceql.labelling.by_rank import Settings, label_by_rank, scratch
    from traceql.labelling.inputs import read_timeline
    from traceql.labelling.label import label
    from traceql.parallel import Pool
    from traceql.sources.shards import shards

    twin, stock = MATRIX.run("vit-twin", "h100-a"), MATRIX.run("vit-2g-cap2-stock", "h100-a")
    for run, expected in ((twin, 0), (stock, 1)):
        whole = label(read_timeline(run.path()), single_trace=True)
        with scratch() as tmp, Pool(1) as pool:
            parts = label_by_rank(shards(run.path()), Settings(None, 1.2, True, False, Path(tmp)), pool=pool)
        said = [n for n in whole.notes if "factors" in n]
        assert len(said) == expected and [n for n in parts.notes if "factors" in n] == said, run.label
