"""`traceql collect` on CPU (gloo): the options that choose the window, the torch.profiler schedule and the
rendezvous, and models that are not DDP (FSDP2, tensor parallelism) collected without isolated steps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.collectors.test_collect import TINY_MODEL, _free_port, _variant
from tests.paths import TINY

torch = pytest.importorskip("torch")


def _step_ranges(trace: Path) -> set[str]:
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    return {e["name"] for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("step_")}


def test_torch_schedule_options_choose_the_recorded_steps(invoke, tmp_path: Path) -> None:
    """torch.profiler's schedule is the --torch-* options': skip 1 step, then 2 cycles of wait 0, warm-up 1,
    active 1. The window spans 1 + 2 x (0 + 1 + 1) = 5 steps in the middle of the last epoch's 6, and each cycle
    writes a trace of its active step only (the default schedule records 3 steps in one trace: torch_run)."""
    skip, wait, warmup, active, repeat = 1, 0, 1, 1, 2
    out = tmp_path / "tiny-sched"
    result = invoke("collect", TINY, "--profiler", "torch", "--out", out, "--timeout", "120", "--isolated-steps", "0",
                    "--torch-skip-first", skip, "--torch-wait", wait, "--torch-warmup", warmup,
                    "--torch-active", active, "--torch-repeat", repeat)
    assert result.exit_code == 0, result.stderr
    span = skip + (wait + warmup + active) * repeat
    start = (6 - span) // 2  # tiny: 6 batches an epoch
    cycles = [{f"step_{start + skip + c * (wait + warmup + active) + wait + warmup + j}" for j in range(active)}
              for c in range(repeat)]
    assert cycles == [{"step_2"}, {"step_4"}]
    manifest = json.loads((out / "manifest.json").read_text())
    assert all(r["status"] == "ok" and len(r["window_ms"]) == span for r in manifest["ranks"])
    for rank in (0, 1):
        first, = (out / "traces" / "cycles").glob(f"tiny-sched_rank{rank}_cycle*.json.gz")
        last = out / "traces" / f"tiny-sched_rank{rank}.json.gz"
        assert [_step_ranges(first), _step_ranges(last)] == cycles
        assert len(list((out / "traces" / "tensorboard").glob(f"rank{rank}.*.pt.trace.json"))) == repeat


def test_window_steps_and_rendezvous_options(invoke, tmp_path: Path) -> None:
    """``--steps 3``: the window is the 3 middle steps of the last epoch. ``--nnodes/--node-rank/--rdzv-*``
    start torchrun on that rendezvous, not ``--standalone``: the ranks see its id and node rank, and the static
    backend puts the store at the endpoint."""
    model = TINY_MODEL + '''

_get_model = get_model


def get_model(rank: int, cap_size: float) -> nn.Module:
    import json
    from pathlib import Path
    keys = ("TORCHELASTIC_RUN_ID", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
    (Path(__file__).parent / f"env{rank}.json").write_text(json.dumps({k: os.environ.get(k) for k in keys}))
    return _get_model(rank, cap_size)
'''
    folder = _variant(tmp_path, model=model)
    out, port = tmp_path / "run", _free_port()
    result = invoke("collect", folder, "--profiler", "none", "--out", out, "--timeout", "120", "--steps", "3",
                    "--nnodes", "1", "--node-rank", "0", "--rdzv-endpoint", f"127.0.0.1:{port}",
                    "--rdzv-id", "rdzv-test-7", "--rdzv-backend", "static")
    assert result.exit_code == 0, result.stderr
    for rank in (0, 1):
        times = json.loads((out / "results" / f"rank{rank}.json").read_text())["step_times_ms"]
        assert [t["step"] for t in times if t["window"]] == [1, 2, 3]  # (6 - 3) // 2 = 1: the middle of 6
        env = json.loads((folder / f"env{rank}.json").read_text())
        assert env == {"TORCHELASTIC_RUN_ID": "rdzv-test-7", "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)}
    command = (out / "logs" / "launcher.log").read_text().splitlines()[0].split()
    assert {"--nnodes=1", "--node-rank=0", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=rdzv-test-7",
            "--rdzv-backend=static"} <= set(command) and "--standalone" not in command
    launcher = json.loads((out / "manifest.json").read_text())["launcher"]
    assert (launcher["nnodes"], launcher["node_rank"], launcher["rdzv_endpoint"]) == (1, 0, f"127.0.0.1:{port}")


@pytest.mark.parametrize("example", ["gpt2-fsdp2", "block-tp"])
def test_a_model_that_is_not_ddp_collects_without_isolated_steps(invoke, tmp_path: Path, example: str) -> None:
    """FSDP2 and tensor parallelism communicate in every step (no ``no_sync``): on 2 gloo ranks under
    torch.profiler the collection trains them, runs no isolated step, and says why in the manifest and on
    stderr; the same folder with ``world_size=1`` is the isolated run of the same shapes."""
    out = tmp_path / example
    result = invoke("collect", TINY.parent / example, "--profiler", "torch", "--out", out, "--timeout", "240")
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["world_size"] == 2
    assert all(r["isolated_steps"] == 0 and r["window"]["isolated_before"] == [] for r in manifest["ranks"])
    assert len(manifest["notes"]) == 1 and "no isolated steps" in manifest["notes"][0]
    assert "--set world_size=1" in manifest["notes"][0] and "note: no isolated steps" in result.stdout
    events = json.loads(gzip.decompress((out / "traces" / f"{example}_rank0.json.gz").read_bytes()))["traceEvents"]
    names = {e["name"] for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("step_")}
    assert len(names) == 3 and not any(n.endswith("_nosync") for n in names)  # the 3 active steps, none isolated


def _holds(line: list[str], part: list[str]) -> bool:
    return any(line[i:i + len(part)] == part for i in range(len(line)))


@pytest.mark.parametrize("profiler,args,parts", [
    ("nsys", ["--nsys-trace", "cuda,nvtx,osrt", "--nsys-args", "-s cpu --cpuctxsw process-tree"],
     [["profile", "-t", "cuda,nvtx,osrt", "-s", "cpu", "--cpuctxsw", "process-tree"]]),
    ("nsys", [], [["profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw", "none"]]),
    ("ncu", ["--ncu-kernel", "gemm|sgemm", "--ncu-launch-skip", "7", "--ncu-launch-count", "3",
             "--ncu-args", "--set full"],
     [["--launch-skip", "7", "--launch-count", "3"], ["-k", "regex:gemm|sgemm"], ["--set", "full"]]),
    ("ncu", [], [["--launch-skip", "0", "--launch-count", "50"]]),
])
def test_profiler_options_become_the_profilers_command_line(tmp_path: Path, profiler: str, args: list[str],
                                                            parts: list[list[str]]) -> None:
    """`collect`'s nsys and ncu options, parsed as the command line parses them, make the command each rank
    runs under the profiler (this machine has no GPU, and collect refuses nsys and ncu without one, so the
    run itself is made on a GPU host: datasets/runs)."""
    import typer

    from traceql.cli import app
    from traceql.collectors.profilers import ProfilerOptions, wrap_command
    from traceql.commands.collect import PROFILER_FIELDS

    command = typer.main.get_command(app).commands["collect"]
    params = command.make_context("collect", [str(TINY), "--profiler", profiler, *args]).params
    opts = ProfilerOptions(name=profiler, **{k: v for k, v in params.items() if k in PROFILER_FIELDS and k != "name"})
    line = wrap_command(opts, Path("/opt/bin/tool"), tmp_path / "rank0", ["python", "driver.py"])
    assert line[0] == "/opt/bin/tool" and line[-2:] == ["python", "driver.py"]
    assert all(_holds(line, part) for part in parts), line
    assert ("-k" in line) == ("--ncu-kernel" in args)
