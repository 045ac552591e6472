"""The ground-truth matrix as shipped: its loader, its manifests, its labels, and the validation page against the
runs (figures recomputed from the real exports, not read back)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import polars as pl
import pytest

from tests.paths import ROOT
from traceql.analyzers.baselines.learned import SCHEMA, empty
from traceql.errors import InputError
from traceql.validation import held_out, load_matrix, scoring, whatifs
from traceql.validation.matrix import family
from traceql.validation.page import render
from traceql.validation.report import SETTINGS

MATRIX = load_matrix()
FIGURES = json.loads((MATRIX.root / "validation.json").read_text())
FIGURES_PAGE = FIGURES


def test_the_matrix_holds_its_configurations_and_their_counterfactuals() -> None:
    configs = MATRIX.configurations()
    assert len(MATRIX.runs) == 113 and len(configs) == 43
    assert {r.gpu for r in MATRIX.runs} == {"h100-a", "h100-b", "h100-c", "h100-d"}
    assert {r.kind for r in MATRIX.runs} == {"h100"}
    labelled = [c for c in configs if c.gpu != "h100-d"]  # h100-d: bucket-cap pairs, no twin
    assert all(c.twin is not None and c.twin.gpu == c.gpu for c in labelled)  # each host's own twin
    assert all(c.twin is None and not c.serial for c in configs if c.gpu == "h100-d")
    assert sum(bool(c.serial) for c in configs) == 38
    assert len({r.label for r in MATRIX.runs}) == len(MATRIX.runs)
    assert {family(c.model) for c in configs} == {"gpt2", "llama", "bert", "vit", "resnet50"}
    assert {(c.world, c.cap) for c in configs} == {(2, 2), (2, 25), (4, 2), (4, 25), (2, 400), (2, 1000)}
    assert len(MATRIX.injected("cpu-straggler")) == 5 and len(MATRIX.injected("gpu-delay")) == 5
    for noisy in (c for c in configs if c.model == "resnet50b32"):
        assert len(noisy.stock) == len(noisy.serial) == 3
    # h100-e: repeats of every stock and serialized configuration but h100-d's, their measured steps alone
    assert len(MATRIX.repeats) == 48 and {r.gpu for r in MATRIX.repeats} == {"h100-e"}
    assert all(r.light and not list(r.folder.glob("traces/*")) for r in MATRIX.repeats)
    pooled = MATRIX.pooled()
    assert len(pooled) == 21 and all(len(p.stock) >= 2 and len(p.serial) >= 2 for p in pooled)
    assert sum(len(p.stock) >= 3 and len(p.serial) >= 3 for p in pooled) == 16
    assert all(r.kind == "h100" and not r.light for p in pooled for r in p.traced)


def test_a_light_repeat_measures_what_its_traces_did(tmp_path) -> None:
    """A traced run lightened as the repeats were (``bench/groundtruth/lighten.py``): its shipped steps are those
    its traces give, so a repeat is measured exactly as a traced run."""
    run = MATRIX.run("gpt2-2g-cap2-serial", "h100-c")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "groundtruth" / "lighten.py"), "--batch", "h100-x",
                           "--root", str(tmp_path), str(run.folder)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    light = load_matrix(tmp_path).repeats
    assert [r.name for r in light] == [run.name] and light[0].light and light[0].role == "serial"
    made = tmp_path / "h100-x" / run.name
    assert not (made / "traces").exists()
    assert (made / "manifest.json").read_bytes() == (run.folder / "manifest.json").read_bytes()
    got, want = whatifs.measured_steps(light[0]), whatifs.measured_steps(run)
    assert got.equals(want) and want.height == 5 and (want["gap_ns"] > 0).all()


def test_each_manifest_names_the_hardware_software_and_counterfactual() -> None:
    for run in MATRIX.runs + MATRIX.repeats:
        m = run.manifest
        assert m["status"] == "complete", run.name
        assert m["environment"]["gpu_names"][0] == "NVIDIA H100 80GB HBM3" and m["environment"]["nccl"] == "2.28.9"
        assert m["profiler"]["version"].startswith("NVIDIA Nsight Systems") and m["world_size"] == run.world
        local = m["input"]["local_config"]
        assert (local.get("comm") == "serial") == (run.role == "serial"), run.name
        assert all(r["comm"] == ("serial" if run.role == "serial" else "overlap") for r in run.results())


def test_a_gpu_delay_run_names_rank_steps_and_length() -> None:
    for run in MATRIX.injected("gpu-delay"):
        assert run.injected() == {"rank": 1, "steps": [3, 5], "ms": 12}
        delayed = run.results()[1]["gpu_delay"]
        assert delayed["steps"] == [3, 5] and delayed["cycles"] > 0
        assert abs(delayed["measured_ms"] - 12) < 0.6, delayed  # the calibrated spin lasts what was asked
        assert "gpu_delay" not in run.results()[0]


def test_a_run_unpacks_to_a_folder_every_command_reads(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRACEQL_CACHE", str(tmp_path))
    run = MATRIX.run("gpt2-2g-cap25-stock", "h100-b")
    folder = run.path()
    assert folder.is_relative_to(tmp_path) and run.path() == folder  # once, then reused
    import traceql

    ranks = traceql.read_trace(folder).sql("SELECT DISTINCT rank FROM kernels ORDER BY rank")
    assert ranks["rank"].to_list() == [0, 1]
    assert sorted(p.name for p in (folder / "traces").iterdir()) == ["gpt2-2g-cap25-stock_rank0.sqlite",
                                                                     "gpt2-2g-cap25-stock_rank1.sqlite"]


def test_a_missing_matrix_is_one_clear_error(tmp_path) -> None:
    with pytest.raises(InputError) as err:
        load_matrix(tmp_path / "nowhere")
    assert "no ground-truth matrix here" in str(err.value) and "nowhere" in str(err.value)
    (tmp_path / "h100" / "my-run").mkdir(parents=True)
    (tmp_path / "h100" / "my-run" / "manifest.json").write_text("{}")
    with pytest.raises(InputError, match="name the matrix does not know"):
        load_matrix(tmp_path)


def test_the_shipped_twin_labels_are_what_detect_makes() -> None:
    cfg = next(c for c in MATRIX.configurations() if c.name == "h100-a vit 2g cap2")
    fresh = scoring.twin_labels(cfg.stock[0], cfg.twin)
    shipped = pl.read_parquet(MATRIX.labels_path(cfg.stock[0]))
    assert fresh.sort(scoring.KEY).equals(shipped.sort(scoring.KEY))
    assert 0 < int(shipped["is_slowdown"].sum()) < shipped.height


def test_the_validation_page_is_what_the_figures_render() -> None:
    assert (ROOT / "docs" / "validation.md").read_text() == render(FIGURES) + "\n"


def test_the_figures_are_those_of_the_runs() -> None:
    """Recomputed here from the exports: a configuration's serialized what-if, a straggler's, a delay's, and
    one stock run's detector and in-run scores at the settings the page says were chosen."""
    cfg = next(c for c in MATRIX.configurations() if c.name == "h100-b llama 2g cap25")
    from traceql.analyzers.replay.alone import CommAlone

    row = next(r for r in FIGURES["serialized"] if r["config"] == cfg.name)
    assert row["wait_us"] != FIGURES["comm_alone"]["wait_ns"] / 1e3  # fitted without the model scored
    s = whatifs.serialized(cfg.stock, cfg.serial, CommAlone(row["wait_us"] * 1e3, row["share"]))
    assert math.isclose(row["predicted_ms"], s.predicted_ns / 1e6) and math.isclose(row["error"], s.error)
    # the same over every host of the GPU kind, light repeats included, and the real saving's interval
    p = next(p for p in MATRIX.pooled() if p.name == "h100 llama 2g cap25")
    row = next(r for r in FIGURES["pooled"] if r["config"] == p.name)
    s = whatifs.pooled(p, CommAlone(row["wait_us"] * 1e3, row["share"]))
    assert (row["traced"], row["stock"], row["serial"]) == (3, 4, 3)
    assert math.isclose(row["saves_predicted_ms"], s.change_predicted_ns / 1e6)
    assert math.isclose(row["measured_ms"], s.measured_ns / 1e6) and math.isclose(row["stock_ms"], s.stock_ns / 1e6)
    assert row["real_low_ms"] <= row["saves_real_ms"] <= row["real_high_ms"] and row["real_low_ms"] > 0
    straggler = MATRIX.run("bert-2g-cap25-cpu-straggler")
    x = whatifs.without_straggler(straggler)
    row = next(r for r in FIGURES["injected"] if r["run"] == straggler.label and r["way"] == "without straggler")
    assert math.isclose(row["predicted_ms"], x.predicted_ns / 1e6) and row["named"] == x.named
    delayed = MATRIX.run("vit-2g-cap25-gpu-delay")
    d = whatifs.shortened_delay(delayed)
    row = next(r for r in FIGURES["injected"] if r["run"] == delayed.label and r["way"] == "delay shortened")
    assert math.isclose(row["predicted_ms"], d.predicted_ns / 1e6) and d.named
    run = MATRIX.run("vit-2g-cap2-stock", "h100-b")
    row = next(r for r in FIGURES["labels"] if r["run"] == run.label)
    assert (row["band"], row["contamination"], row["margin"]) in SETTINGS and row["family"] == "vit"
    truth = pl.read_parquet(MATRIX.labels_path(run))
    held = pl.DataFrame(FIGURES["factors"]["vit"], schema=SCHEMA, orient="row")  # learned without ViT
    assert held.height == row["factors"] and int(held["models"].max()) < len(FIGURES["families"])
    assert [list(r) for r in held.rows()] != FIGURES["factors"]["all"]
    labels = scoring.detector_labels(run, row["band"], row["contamination"], row["margin"], factors=held)
    got = scoring.score(labels, truth)
    assert math.isclose(row["f1"], got.f1) and math.isclose(row["recall"], got.recall)
    f1_decided, _, share = scoring.on_decided(labels, truth)
    assert math.isclose(row["f1_decided"], f1_decided) and math.isclose(row["decided"], share) and 0.5 < share < 1
    plain = scoring.detector_labels(run, row["band"], row["contamination"], row["margin"], factors=empty())
    assert math.isclose(row["f1_without"], scoring.score(plain, truth).f1)
    assert math.isclose(row["inrun_f1"], scoring.score(scoring.inrun_labels(run), truth).f1)


def test_scores_count_what_they_say() -> None:
    """A perfect labeller scores 1; one that labels nothing has recall 0 and claims no time."""
    run = MATRIX.run("gpt2-2g-cap2-stock")
    truth = pl.read_parquet(MATRIX.labels_path(run))
    perfect = scoring.score(truth, truth)
    assert perfect.f1 == perfect.f1_far == 1.0 and perfect.lost_ratio == 1.0 and perfect.truth == perfect.tp > 0
    nothing = scoring.score(truth.with_columns(pl.lit(False).alias("is_slowdown")), truth)
    assert nothing.recall == 0.0 and nothing.f1 == 0.0 and nothing.lost_ns == 0


def test_ranks_late_by_turns_give_one_straggler_a_step() -> None:
    """The CPU-bound ResNet-50: both ranks held the other in step 3 of this run; one is named, and the what-if
    keeps one row a step (two named ranks once doubled the step and failed `ranks`' pricing)."""
    from traceql.commands.ranks import ranks

    path = MATRIX.run("resnet50b32-2g-cap25-stock-r1").path()
    named = ranks(path).stragglers
    assert named.height and named.select("run_id", "step").is_duplicated().sum() == 0
    steps = whatifs.replayed_steps(MATRIX.run("resnet50b32-2g-cap25-stock-r1"))
    assert steps["step"].to_list() == [2, 3, 4, 5, 6]


def test_each_verdict_s_page_gives_its_measured_error() -> None:
    from traceql.validation.page import verdict_errors

    for page, sentence in verdict_errors(FIGURES).items():
        assert sentence in (ROOT / "docs" / page).read_text(), page


@pytest.mark.parametrize("name", ["gpt2-2g-cap25-gpu-delay", "llama-2g-cap25-gpu-delay", "resnet50-2g-cap25-gpu-delay"])
def test_a_gpu_side_straggler_is_named_and_removed(name: str) -> None:
    """Rank 1's GPU spun 12 ms before steps 3 and 5: its CPU was on time, its GPU late. `ranks` names it in
    both steps and the what-if without it lands within 3 % of the run's other steps (it kept the delayed step
    whole, +13 %, when only a late CPU and activities slower than usual were removed). ResNet-50's CPU, once
    its GPU had drained, launched 0.3 to 1 ms apart for the rest of the step (+9 % while those lags were kept)."""
    from traceql.commands.ranks import ranks

    run = MATRIX.run(name)
    named = ranks(run.path()).stragglers
    assert sorted(zip(named["step"].to_list(), named["rank"].to_list(), strict=True)) == [(3, 1), (5, 1)]
    x = whatifs.without_straggler(run)
    assert x.named and abs(x.error) < 0.03 and x.delayed_ns > 1.1 * x.normal_ns


def test_the_matrix_collector_runs_a_plan_and_packs_it(tmp_path) -> None:
    """``bench/groundtruth/collect_matrix.py`` as a smoke test on CPU (gloo, no profiler): a twin, a stock and a
    serialized run of the plan, scheduled on two slots, packed into a tar with their summary."""
    import tarfile

    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "groundtruth" / "collect_matrix.py"), "--batch", "a",
                           "--out", str(out), "--gpus", "2", "--cpu", "--scratch", str(tmp_path / "scratch"),
                           "--only", "tiny-twin,gpt2-twin,gpt2-2g-cap25-serial"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["runs"]) == {"gpt2-twin", "gpt2-2g-cap25-serial"}  # no such run as tiny-twin in the plan
    assert all(r["rc"] == 0 and r["packed"] for r in summary["runs"].values()), summary
    with tarfile.open(out / "runs-00.tar") as tar:
        names = tar.getnames()
    assert "gpt2-2g-cap25-serial/manifest.json" in names and "gpt2-twin/results/rank0.json" in names
    local = json.loads((tmp_path / "scratch" / "runs" / "gpt2-2g-cap25-serial" / "manifest.json").read_text())
    assert local["input"]["local_config"]["comm"] == "serial" and local["world_size"] == 2


def test_the_what_if_carries_its_classes_measured_error() -> None:
    """The packaged figures are the validation page's: per class of run (GPU kind, GPU-bound or launch-bound),
    the worst errors over its configurations, recomputed here from the page's rows (a model's alternating runs
    in place of its separate runs of their GPU kind; the one GPU-bound alternating model, a class of one family,
    none); a GPU-bound run of the matrix's kind is told its class's figures."""
    import traceql
    from traceql.verdicts.measured import FIGURES, IDLE_SHARE, summarise

    shipped = json.loads(FIGURES.read_text())
    assert shipped == json.loads(json.dumps(summarise(FIGURES_PAGE)))
    rows = [r for r in [*FIGURES_PAGE["pooled"], *FIGURES_PAGE["library"]] if r.get("idle") is not None]
    launch = [r for r in rows if r["idle"] > IDLE_SHARE and r["gpu"] == "h100"]
    gpu = [r for r in rows if r["idle"] <= IDLE_SHARE and r["gpu"] == "h100"]
    paired = FIGURES_PAGE["alternating"]
    h200 = [r for r in paired if r["gpu"] == "h200" and r["idle"] > IDLE_SHARE]
    assert {r["model"] for r in h200} == {"bart", "efficientnet", "qwen2moe", "regnet", "resnet50b32", "twotower"}
    assert {r["model"] for r in rows if r["gpu"] == "h200"} < {r["model"] for r in h200}  # all replaced
    assert {r["model"] for r in launch} >= {"resnet50b32", "bart", "efficientnet", "qwen2moe", "twotower"}
    classes = shipped["classes"]
    assert classes["h100 GPU-bound"]["serialized"] == max(abs(r["error"]) for r in gpu)
    assert classes["h100 launch-bound"]["serialized"] == max(abs(r["error"]) for r in launch)
    assert classes["h100 GPU-bound"]["configurations"] == len(gpu)
    assert set(classes) == {"h100 GPU-bound", "h100 launch-bound", "h200 launch-bound"}
    assert classes["h200 launch-bound"]["serialized"] == max(abs(r["error"]) for r in h200)
    strag = [r["error"] for r in FIGURES_PAGE["injected"] if r["way"] == "without straggler"]
    assert classes["h100 GPU-bound"]["straggler"] == max(map(abs, strag))
    said = traceql.whatif(ROOT / "datasets" / "runs" / "gpt2-pair-nsys").measured
    assert said is not None and said.startswith("This run (H100, GPU-bound")


def test_communication_alone_is_the_fit_on_the_matrix_and_holds_on_a_configuration() -> None:
    """The serialized what-if's model of a collective alone: the shipped constants are the fit on every
    configuration (what the validation page reports), and on a configuration's own runs the tails it predicts
    from the overlapped run are closer to the serialized run's than the overlapped tails are."""
    from traceql.analyzers.replay.activities import activities, on_clock
    from traceql.analyzers.replay.alone import CommAlone, alone_tails
    from traceql.analyzers.replay.graph import build
    from traceql.labelling.inputs import read_timeline

    assert (CommAlone().wait_ns, CommAlone().share) == (FIGURES["comm_alone"]["wait_ns"],
                                                        FIGURES["comm_alone"]["share"])
    cfg = next(c for c in MATRIX.configurations() if c.name == "h100-c llama 2g cap2")
    timeline = read_timeline(cfg.stock[0].path())
    rg = build(on_clock(activities(timeline.kernels, timeline.memops, timeline.ranks)), timeline.waits)
    member = rg.graph.group[:rg.n_ops] >= 0
    measured, alone = rg.graph.tail[:rg.n_ops][member].sum(), alone_tails(rg, CommAlone())[:rg.n_ops][member].sum()
    serial = whatifs.comm_tails(cfg.serial[0])["tail"].sum()
    assert alone < measured and abs(alone - serial) < 0.5 * abs(measured - serial)


def test_a_run_read_once_is_labelled_as_detect_labels_it() -> None:
    """The family-held-out validation labels a run many ways from one reading (``validation.held_out``): the
    same labels, kernel for kernel, as `detect --single-trace` at each setting and table of factors."""
    run = MATRIX.run("llama-4g-cap2-stock", "h100-a")
    case = held_out.prepare(run, pl.read_parquet(MATRIX.labels_path(run)))
    for setting, factors in (((1.2, 0.1, 0.0), empty()), ((1.1, 0.05, 0.01), None)):
        mine = held_out.labels(case, setting, factors)
        theirs = scoring.detector_labels(run, *setting, factors=factors).select(mine.columns)
        assert mine.sort(scoring.KEY).equals(theirs.sort(scoring.KEY))
    kinds = held_out.by_kind(mine, case.truth)
    assert {"clean", "contaminated"} <= set(kinds)
    assert sum(k.truth for k in kinds.values()) == scoring.score(mine, case.truth).truth
