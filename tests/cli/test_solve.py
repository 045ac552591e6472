"""`traceql solve` as a user runs it: the table within 80 columns, the JSON form, and every bad input (cluster
file, profile folder, global batch) as one line on stderr with a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import profiles as synth
from tests.paths import ROOT
from traceql.tuning import read_cluster

CLUSTERS = ROOT / "datasets" / "examples" / "clusters"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return synth.write(tmp_path / "profiles", synth.synthetic())


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    return synth.cluster(tmp_path / "mixed.json", ("node0", synth.FAST, 1), ("node1", synth.SLOW, 1))


def one_line_error(result, code: int = 2) -> str:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    return result.stderr


@pytest.mark.parametrize("global_batch", [8, 12, 48])
def test_the_table_fits_80_columns(invoke, narrow, folder: Path, mixed: Path, global_batch: int) -> None:
    result = invoke("solve", folder, "--global-batch", global_batch, "--cluster", mixed)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 80
    assert result.stderr == "" and out.startswith("note: ")  # the notes about the profiles, then the answer
    assert f"\nBest for a global batch of {global_batch} on 2 GPUs (2 nodes)" in out and "Runner-ups" in out


def test_the_hand_worked_case(invoke, narrow, folder: Path, mixed: Path) -> None:
    out = invoke("solve", folder, "-n", 8, "--cluster", mixed, "--top", 2).stdout
    lines = out.splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("Best for")):]  # after the notes
    assert lines[0] == "Best for a global batch of 8 on 2 GPUs (2 nodes): 23.00 ms, 347.8 samples/s"
    assert lines[1:3] == ["accumulation 1, cap 25 MB; compute 20.00 ms (the slowest node)",
                          "communication 3.00 ms: exposed 2.00 + overlap tax 1.00"]
    assert [line.split()[-5:] for line in lines if line.startswith("node")][1:] == [
        ["1", "2", "3", "6", "20.00"], ["1", "2", "1", "2", "16.00"]]  # GPUs, batch, virtual, samples, ms
    assert "Equal split (batch 4 per GPU, cap 25 MB): 31.00 ms; the best: +34.8 % samples/s" in lines
    assert [line.split()[0] for line in lines if line[:1].isdigit()] == ["2", "3"]


def test_json_keys(invoke, folder: Path, mixed: Path) -> None:
    result = invoke("solve", folder, "--global-batch", 8, "--cluster", mixed, "--format", "json")
    data = json.loads(result.stdout)
    assert list(data) == ["global_batch", "model", "cluster", "gpus", "max_accumulation", "max_virtual", "top",
                          "communication", "best", "runner_ups", "naive", "notes"]
    assert list(data["best"]) == ["iteration_ms", "compute_ms", "comm_ms", "exposed_comm_ms", "overlap_tax_ms",
                                  "samples_per_s", "accumulation", "cap_mb", "replicas", "estimated", "nodes"]
    assert list(data["best"]["nodes"][0]) == ["name", "gpu", "count", "batch", "virtual_workers", "samples",
                                              "compute_ms"]
    assert data["best"]["iteration_ms"] == 23.0 and len(data["runner_ups"]) == 5
    assert data["naive"]["feasible"] and data["naive"]["config"]["iteration_ms"] == 31.0
    assert round(data["naive"]["gain_pct"], 2) == 34.78
    assert data["communication"]["gpu"] == synth.FAST and data["model"] == "synthetic"
    assert any("likely an underestimate" in text for text in data["notes"]) and result.stderr == ""  # one node


def test_one_gpu_and_an_estimated_cap(invoke, narrow, folder: Path, tmp_path: Path) -> None:
    one = synth.cluster(tmp_path / "one.json", ("n", synth.FAST, 1))
    result = invoke("solve", folder, "-n", 8, "--cluster", one)
    assert result.exit_code == 0 and "no bucket cap, no communication" in result.stdout
    assert result.stdout.startswith("note: one GPU: no communication")
    # where only the estimated cap is left, the prediction is marked
    data = synth.buckets()
    data["caps"] = data["caps"][2:]
    (folder / "buckets-test-gpu-fast.json").write_text(json.dumps(data))
    two = synth.cluster(tmp_path / "two.json", ("n", synth.FAST, 2))
    result = invoke("solve", folder, "-n", 8, "--cluster", two)
    assert "accumulation 1, cap 50 MB; compute 14.00 ms (the slowest node)" in result.stdout
    assert "communication ~5.00 ms: exposed 5.00 + overlap tax 0.00" in result.stdout
    assert ": ~19.00 ms" in result.stdout and "cap(s) 50 MB: no trace measured" in result.stdout


def test_an_unreachable_global_batch(invoke, folder: Path, mixed: Path) -> None:
    err = one_line_error(invoke("solve", folder, "--global-batch", 1, "--cluster", mixed))
    assert "--global-batch 1: no configuration reaches it exactly" in err and "reachable near it: 2, 3, 4" in err
    err = one_line_error(invoke("solve", folder, "--global-batch", 0, "--cluster", mixed))
    assert "--global-batch" in err


@pytest.mark.parametrize("text,phrase", [
    ("{not json", "invalid JSON"),
    ('{"node": []}', "not a cluster file"),
    ('{"nodes": []}', "no nodes"),
    ('{"nodes": [3]}', "node 0 is not an object"),
    ('{"nodes": [{"name": "a", "gpu": "Test GPU fast"}]}', "node 0: missing key 'count'"),
    ('{"nodes": [{"name": "a", "gpu": "Test GPU fast", "count": 0}]}', "count must be an integer of at least 1"),
    ('{"nodes": [{"name": "a", "gpu": "Test GPU fast", "count": "2"}]}', "count must be an integer"),
    ('{"nodes": [{"name": "a", "gpu": "Test GPU fast", "count": 1, "cnt": 2}]}', "unknown key 'cnt'"),
    ('{"nodes": [{"name": "a", "gpu": "", "count": 1}]}', "gpu must be a non-empty string"),
    ('{"nodes": [{"name": "a", "gpu": "Test GPU fast", "count": 1}, {"name": "a", "gpu": "Test GPU slow", '
     '"count": 1}]}', "node name 'a' used twice"),
])
def test_a_bad_cluster_file(invoke, folder: Path, tmp_path: Path, text: str, phrase: str) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(text)
    err = one_line_error(invoke("solve", folder, "-n", 8, "--cluster", path))
    assert f"error: {path}: " in err and phrase in err, err


def test_a_missing_cluster_file(invoke, folder: Path, tmp_path: Path) -> None:
    assert f"{tmp_path / 'no.json'}: no such file" in one_line_error(
        invoke("solve", folder, "-n", 8, "--cluster", tmp_path / "no.json"))


@pytest.mark.parametrize("kind", ["memory", "compute"])
def test_a_missing_profile_names_the_file(invoke, folder: Path, mixed: Path, kind: str) -> None:
    (folder / f"{kind}-test-gpu-slow.json").unlink()
    err = one_line_error(invoke("solve", folder, "-n", 8, "--cluster", mixed))
    assert f"{folder / f'{kind}-test-gpu-slow.json'}: no {kind} profile for 'Test GPU slow' (the GPU of node node1)" \
        in err


def test_bad_profile_folders(invoke, folder: Path, mixed: Path, tmp_path: Path) -> None:
    err = one_line_error(invoke("solve", tmp_path / "none", "-n", 8, "--cluster", mixed))
    assert f"{tmp_path / 'none'}: no such folder" in err
    (folder / "copy.json").write_text((folder / "compute-test-gpu-fast.json").read_text())
    err = one_line_error(invoke("solve", folder, "-n", 8, "--cluster", mixed))
    assert "a second compute profile of 'Test GPU fast'" in err and "compute-test-gpu-fast.json" in err
    (folder / "copy.json").write_text('{"format": "traceql-profile/1", "kind": "compute", "model": "m", '
                                      '"gpu": "X", "batches": [{"batch": 1}]}')
    err = one_line_error(invoke("solve", folder, "-n", 8, "--cluster", mixed))
    assert f"{folder / 'copy.json'}: entry 0: missing key 'forward_ms'" in err
    (folder / "copy.json").write_text("[1, 2")
    err = one_line_error(invoke("solve", folder, "-n", 8, "--cluster", mixed))
    assert f"{folder / 'copy.json'}: invalid JSON" in err


def test_the_example_cluster_files() -> None:
    assert [(n.gpu, n.count) for n in read_cluster(CLUSTERS / "two-h200.json")] == [("NVIDIA H200", 2)]
    assert [(n.gpu, n.count) for n in read_cluster(CLUSTERS / "h200-h100.json")] == [
        ("NVIDIA H200", 2), ("NVIDIA H100 80GB HBM3", 2)]


MEASURED = ["gpt2-b16-cap2-none", "gpt2-b16-cap25-none", "gpt2-b16-cap100-none", "gpt2-b8-acc2-cap25-none",
            "gpt2-b8-vw2-cap25-none"]


@pytest.mark.parametrize("run", MEASURED)
def test_predictions_match_the_measured_runs(run: str) -> None:
    """GPT-2 on 2 x H200, a global batch of 32: the configurations `solve` weighs were run with `traceql
    collect --profiler none` on the same machine; each predicted iteration time is within 10 % of the run's
    median window step (measured: within 1.3 %), and the best predicted is the fastest measured."""
    from traceql.commands.solve import solve

    result = solve(ROOT / "datasets" / "examples" / "profiles" / "gpt2", 32, CLUSTERS / "two-h200.json", top=20)
    configs = result.configs
    manifest = json.loads((ROOT / "datasets" / "runs" / run / "manifest.json").read_text())
    local = manifest["input"]["local_config"]
    want = (local["batchsize"], local.get("virtual_workers", 1), local.get("accumulation_steps", 1),
            local["cap_size"])
    config = next(c for c in configs if (c.nodes[0].batch, c.nodes[0].virtual, c.accumulation,
                                         c.cap.cap_mb) == want)
    measured = max(r["window_median_ms"] for r in manifest["ranks"])
    assert config.time_ms == pytest.approx(measured, rel=0.10)
    fastest = min(MEASURED, key=lambda r: max(x["window_median_ms"] for x in json.loads(
        (ROOT / "datasets" / "runs" / r / "manifest.json").read_text())["ranks"]))
    best = result.best
    assert f"gpt2-b{best.nodes[0].batch}-cap{best.cap.cap_mb:g}-none" == fastest


def test_no_negative_time_nor_endless_rate_is_printed() -> None:
    from types import SimpleNamespace

    from traceql.cli.solve import _ms, _rate

    cap = SimpleNamespace(estimated=False)
    assert _ms(SimpleNamespace(time_ms=-621.7, cap=cap)) == "-" and _ms(SimpleNamespace(time_ms=2.5, cap=cap)) == "2.50"
    assert _rate(SimpleNamespace(time_ms=5e-324, global_batch=64)) == "-"
    assert _rate(SimpleNamespace(time_ms=0.0, global_batch=64)) == "-"
    assert _rate(SimpleNamespace(time_ms=1.0, global_batch=10**400)) == "-"
    assert _rate(SimpleNamespace(time_ms=1000.0, global_batch=64)) == "64.0"
