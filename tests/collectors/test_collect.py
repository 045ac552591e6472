"""`traceql collect` end to end on CPU: 2 gloo DDP processes, torch.profiler and timing-only runs, faults."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import TINY

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory) -> tuple[Path, object]:
    from typer.testing import CliRunner

    from traceql.cli import app

    out = tmp_path_factory.mktemp("runs") / "tiny-torch"
    result = CliRunner().invoke(app, ["collect", str(TINY), "--profiler", "torch", "--out", str(out),
                                      "--timeout", "120"], catch_exceptions=False)
    return out, result


def test_torch_collection_writes_a_complete_run_folder(torch_run) -> None:
    out, result = torch_run
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["device"] == "cpu" and manifest["world_size"] == 2
    assert manifest["environment"]["torch"] == torch.__version__
    assert manifest["input"]["local_config"] == json.loads((TINY / "local_config.json").read_text())
    ranks = manifest["ranks"]
    assert [(r["rank"], r["status"], r["profiled"]) for r in ranks] == [(0, "ok", True), (1, "ok", True)]
    # 2 epochs of 6 batches; the torch schedule wait 1 + warmup 1 + active 3 sits in the last epoch
    assert all(r["steps"] == 12 and len(r["window_ms"]) == 5 for r in ranks)
    assert manifest["files"]["traces"] == [f"traces/tiny-torch_rank{r}.json.gz" for r in (0, 1)]
    for rel in manifest["files"]["traces"] + manifest["files"]["other"] + manifest["files"]["logs"]:
        assert (out / rel).is_file(), rel
    ops = (out / "traces" / "tiny-torch_rank0_ops.txt").read_text()
    assert "aten::" in ops and "Self CPU" in ops
    assert list((out / "traces" / "tensorboard").glob("rank0.*.pt.trace.json"))


def test_isolated_steps_are_in_the_trace_and_the_manifest(torch_run) -> None:
    """Under torch.profiler on 2 ranks, one isolated step runs by default, before the first active step."""
    out, _ = torch_run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["profiler"]["isolated_steps"] == 1
    for r in manifest["ranks"]:
        assert r["isolated_steps"] == 1 and r["isolated_median_ms"] > 0 and r["isolated_cost_pct"] > 0
        assert r["window"]["isolated_before"] == [2]  # the first active step of wait 1, warmup 1, active 3
    events = json.loads(gzip.decompress((out / "traces" / "tiny-torch_rank0.json.gz").read_bytes()))["traceEvents"]
    ranges = [(e["name"], e["ts"], e["ts"] + e["dur"]) for e in events
              if e.get("cat") == "user_annotation" and e["name"].startswith("step_")]
    names = [name for name, _, _ in sorted(ranges, key=lambda r: r[1])]
    assert names == ["step_2_nosync", "step_2", "step_3", "step_4"]
    spans = sorted((a, b) for _, a, b in ranges)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:], strict=False))  # one after another


def test_each_step_holds_its_cpu_sections_in_order(torch_run) -> None:
    """Each recorded step holds a forward, a backward and an optimizer range, in that order; the isolated step
    (no optimizer step) a forward and a backward; the sections are what the idle cause is split by."""
    from traceql.labelling.late import cpu_ranges
    from traceql.trace import read_trace

    out, _ = torch_run
    with read_trace(out) as trace:
        nvtx = trace.nvtx.filter(trace.nvtx["rank"] == 0).sort("start_ns")
    steps = nvtx.filter(nvtx["text"].str.starts_with("step_"))
    assert steps["text"].to_list() == ["step_2_nosync", "step_2", "step_3", "step_4"]
    sections = cpu_ranges(nvtx).filter(cpu_ranges(nvtx)["text"].is_in(["forward", "backward", "optimizer"]))
    for step in steps.iter_rows(named=True):
        inside = sections.filter((sections["start_ns"] >= step["start_ns"]) & (sections["end_ns"] <= step["end_ns"]))
        want = ["forward", "backward"] + ([] if step["text"].endswith("_nosync") else ["optimizer"])
        assert inside["text"].to_list() == want, step["text"]
        assert (inside["start_ns"][1:] >= inside["end_ns"][:-1]).all()  # one after another


@pytest.mark.parametrize(("profiler", "wanted", "before"), [
    ("torch", 3, [2, 3, 4]), ("torch", 0, []), ("nsys", 1, [1]), ("nsys", 3, [1, 3, 4]), ("nsys", 9, [1, 2, 3, 4])])
def test_isolated_steps_spread_over_the_recorded_steps(profiler: str, wanted: int, before: list[int]) -> None:
    """Never before the window's first step (it starts nsys' capture); several spread from first to last."""
    from traceql.collectors.window import isolated_positions

    args = argparse.Namespace(profiler=profiler, isolated_steps=wanted, torch_skip_first=0, torch_wait=1,
                              torch_warmup=1, torch_active=3)
    assert sorted(isolated_positions(args, 0, 5)) == before


def test_isolated_steps_need_room_in_the_window(invoke, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = invoke("collect", TINY, "--profiler", "torch", "--isolated-steps", "4", "--out", out)
    assert result.exit_code == 2 and "--isolated-steps 4" in result.stderr and "this window has 3" in result.stderr
    assert result.stderr.count("\n") == 1 and not out.exists()


def test_detect_and_info_read_the_run_folder(invoke, torch_run) -> None:
    out, _ = torch_run
    info = json.loads(invoke("info", out, "--format", "json").stdout)
    assert [(r["run_id"], r["rank"], r["rank_from"]) for r in info["ranks"]] == [
        ("tiny-torch", 0, "distributedInfo"), ("tiny-torch", 1, "distributedInfo")]
    result = invoke("detect", out, "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert any("no GPU kernels in this trace" in text for text in data["notes"]) and result.stderr == ""
    assert [r["rank"] for r in data["ranks"]] == [0, 1] and data["totals"]["cases"] == 0


def test_timing_only_collection(invoke, tmp_path: Path) -> None:
    out = tmp_path / "tiny-none"
    result = invoke("collect", TINY, "--profiler", "none", "--out", out, "--ranks", "0")
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["files"]["traces"] == [] and all(r["window_median_ms"] > 0 for r in manifest["ranks"])
    assert [r["profiled"] for r in manifest["ranks"]] == [False, False]
    for rank in manifest["ranks"]:  # every step outside the window but the first (warm-up), in order
        times = json.loads((out / "results" / f"rank{rank['rank']}.json").read_text())["step_times_ms"]
        outside = [round(t["ms"], 3) for t in times if not t["window"] and not t.get("isolated")]
        assert rank["untraced_ms"] == outside[1:] and len(outside) > 2
    detect = invoke("detect", out)
    assert detect.exit_code == 2 and "collected with --profiler none" in detect.stderr


SLEEP_MS = 300  # > 25x a normal step of the tiny model: median 11 ms over 3 runs (30 steps) on 2 shared cores


def test_an_injected_straggler_sleeps_and_the_other_rank_waits(invoke, tmp_path: Path) -> None:
    """On CPU with gloo: rank 1 sleeps 300 ms at the start of window steps 2 and 4; rank 0 waits for it in
    the gradients' all-reduce, so both ranks' steps 2 and 4 last the sleep, the others do not. Rank 0's wait
    is the sleep less how much later its step began than rank 1's: 90 % of the sleep tells the steps apart."""
    out = tmp_path / "tiny-straggler"
    result = invoke("collect", TINY, "--profiler", "none", "--out", out,
                    "--set", f'straggler={{"rank": 1, "steps": [2, 4], "sleep_ms": {SLEEP_MS}}}')
    assert result.exit_code == 0, result.stderr
    for rank in (0, 1):
        times = json.loads((out / "results" / f"rank{rank}.json").read_text())["step_times_ms"]
        window = {t["step"]: t["ms"] for t in times if t["window"]}
        print(f"rank {rank} step ms: {window}")
        assert sorted(window) == [0, 1, 2, 3, 4]
        assert all((window[i] >= 0.9 * SLEEP_MS) == (i in (2, 4)) for i in window), (rank, window)
        assert rank == 0 or min(window[2], window[4]) >= SLEEP_MS, window  # rank 1 slept it whole
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["input"]["local_config"]["straggler"] == {"rank": 1, "steps": [2, 4], "sleep_ms": SLEEP_MS}


def _variant(tmp_path: Path, *, model: str | None = None, local: dict | None = None,
             glob: dict | None = None) -> Path:
    d = tmp_path / "input"
    shutil.copytree(TINY, d)
    if model is not None:
        (d / "define_model.py").write_text(model)
    if local is not None:
        (d / "local_config.json").write_text(json.dumps(local))
    if glob is not None:
        (d / "global_config.json").write_text(json.dumps(glob))
    return d


TINY_LOCAL = json.loads((TINY / "local_config.json").read_text())
TINY_MODEL = (TINY / "define_model.py").read_text()
BAD = [
    ("missing_folder", None, "no such input folder"),
    ("no_function", dict(model=TINY_MODEL.replace("def backward_pass", "def backward")),
     "no top-level function backward_pass()"),
    ("arity", dict(model=TINY_MODEL.replace("def get_dataloader(rank: int, batchsize: int)",
                                            "def get_dataloader(rank: int)")), "get_dataloader() takes 1"),
    ("unknown_key", dict(local={**TINY_LOCAL, "lr": 0.1}), "unknown key(s) lr"),
    ("wrong_type", dict(local={**TINY_LOCAL, "epochs": "two"}), 'epochs must be an integer of at least 1, got "two"'),
    ("missing_key", dict(local={k: v for k, v in TINY_LOCAL.items() if k != "batchsize"}), "missing key 'batchsize'"),
    ("straggler_rank", dict(local={**TINY_LOCAL, "straggler": {"rank": 2, "steps": [2], "sleep_ms": 5}}),
     "straggler rank must be a rank of the run (0..1), got 2"),
    ("straggler_shape", dict(local={**TINY_LOCAL, "straggler": {"rank": 1}}), 'straggler must be {"rank": R'),
    ("global_key", dict(glob={"cuda_visible_devices": "0", "gpus": 2}), "unknown key(s) gpus"),
    ("python_path", dict(glob={"python_path": "/nonexistent/python3"}), "python not found at /nonexistent/python3"),
    ("cuda_version", dict(glob={"cuda_version_check": "12.4"}), "CUDA version mismatch"),
    ("nsys_missing", dict(glob={"nsys_path": "/opt/none/nsys"}), "nsys not found at /opt/none/nsys"),
]


ENVIRONMENT = {"python_path", "cuda_version", "nsys_missing"}  # this machine cannot run it: exit 5


@pytest.mark.parametrize("name,change,phrase", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_before_launch(invoke, tmp_path: Path, name: str, change, phrase: str) -> None:
    folder = tmp_path / "nowhere" if change is None else _variant(tmp_path, **change)
    out = tmp_path / "run"
    profiler = "nsys" if name == "nsys_missing" else "none"
    result = invoke("collect", folder, "--profiler", profiler, "--out", out)
    assert result.exit_code == (5 if name in ENVIRONMENT else 2), result.output
    assert result.stderr.count("\n") == 1 and phrase in result.stderr, result.stderr
    assert not out.exists()  # nothing was launched or written


def test_no_gpu_for_nccl(invoke, tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    result = invoke("collect", TINY, "--device", "cuda", "--out", tmp_path / "run")
    assert result.exit_code == 5 and "no GPU visible to torch: NCCL needs NVIDIA GPUs" in result.stderr
    folder = _variant(tmp_path, glob={"nsys_path": shutil.which("true")})  # an nsys that exists
    result = invoke("collect", folder, "--profiler", "nsys", "--out", tmp_path / "run")
    assert result.exit_code == 5 and "records NVIDIA GPU work" in result.stderr
    result = invoke("collect", TINY, "--profiler", "nsys", "--device", "cpu", "--out", tmp_path / "run")
    assert result.exit_code == 2 and "and --device cpu runs none" in result.stderr  # before any nsys is looked for


def test_a_failing_rank_is_named_with_its_log(invoke, tmp_path: Path) -> None:
    model = TINY_MODEL.replace('def backward_pass(output: torch.Tensor) -> None:\n',
                               'def backward_pass(output: torch.Tensor) -> None:\n'
                               '    if os.environ.get("RANK") == "1":\n'
                               '        raise RuntimeError("boom on purpose")\n')
    assert "boom on purpose" in model
    out = tmp_path / "run"
    result = invoke("collect", _variant(tmp_path, model=model), "--out", out, "--timeout", "120")
    assert result.exit_code == 6
    assert "rank 1 failed: RuntimeError: boom on purpose" in result.stderr
    assert result.stderr.count("\n") == 1 and "(define_model.py:" in result.stderr  # one line: where it raised,
    assert f"log: {out / 'logs' / 'rank1.log'}" in result.stderr  # and the rank's log (the traceback is there)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert {r["rank"]: r["status"] for r in manifest["ranks"]}[1] == "failed"
    assert (out / "logs" / "rank0.log").is_file()


def test_a_hanging_run_is_stopped(invoke, tmp_path: Path) -> None:
    model = TINY_MODEL.replace('def backward_pass(output: torch.Tensor) -> None:\n',
                               'def backward_pass(output: torch.Tensor) -> None:\n'
                               '    import time\n    time.sleep(600)\n')
    out = tmp_path / "run"
    result = invoke("collect", _variant(tmp_path, model=model), "--out", out, "--timeout", "15")
    assert result.exit_code == 6 and "timed out; ranks not finished: 0, 1" in result.stderr
    assert json.loads((out / "manifest.json").read_text())["status"] == "timeout"


def test_an_existing_run_folder_is_not_overwritten(invoke, torch_run) -> None:
    out, _ = torch_run
    before = (out / "manifest.json").read_bytes()
    result = invoke("collect", TINY, "--out", out)
    assert result.exit_code == 2 and "choose another --out" in result.stderr
    assert (out / "manifest.json").read_bytes() == before


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ranks_started_by_an_mpi_style_launcher(tmp_path: Path) -> None:
    """--launcher env: each process is one rank, its rank from OMPI_COMM_WORLD_* as mpirun sets it."""
    out = tmp_path / "run"
    port = str(_free_port())
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "2",
               "OMPI_COMM_WORLD_LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
               "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank)}
        procs.append(subprocess.Popen([sys.executable, "-m", "traceql", "collect", str(TINY), "--launcher", "env",
                                       "--out", str(out), "--timeout", "120"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["launcher"]["kind"] == "env"
    assert [r["status"] for r in manifest["ranks"]] == ["ok", "ok"]


@pytest.mark.parametrize("args,phrase", [
    (["--nnodes", "2"], "--nnodes > 1 needs --rdzv-endpoint HOST:PORT"),
    (["--nnodes", "3"], "world_size 2 is not a multiple of --nnodes 3"),
    (["--ranks", "0,5"], "--ranks [0, 5] outside 0..1"),
    (["--profiler", "perf"], "unknown profiler 'perf'"),
])
def test_bad_launch_options(invoke, tmp_path: Path, args: list[str], phrase: str) -> None:
    out = tmp_path / "run"
    result = invoke("collect", TINY, *args, "--out", out)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and phrase in result.stderr, result.stderr
    assert not out.exists()
