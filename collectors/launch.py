"""Run a collection: check everything, launch every rank (torchrun, or one rank per mpirun/srun process),
wait with a time limit, turn profiler output into traces, write manifest.json last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traceql.collectors import manifest
from traceql.collectors.config import InputSpec, load_input
from traceql.collectors.envlaunch import TIMEOUT_GRACE_S, Interrupts, exit_codes_of, run_ranks, stop
from traceql.collectors.errors import CollectError
from traceql.collectors.files import write_json
from traceql.collectors.launch_options import LaunchOptions, check_env_ranks
from traceql.collectors.probe import check_cuda_version, probe_python
from traceql.collectors.profilers import ProfilerOptions, find_binary, postprocess, tool_version
from traceql.collectors.session import rank_from_env

# on a child's PYTHONPATH: a stub traceql package through which it imports the collectors alone (_child/)
CHILD_PATH = str(Path(__file__).resolve().parent / "_child")


def _check_out(spec: InputSpec, out: Path | None) -> None:
    """A run folder is a folder (new, or empty), never inside the input folder it runs."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        raise CollectError(f"--out {out}: is a file, not a folder; give a new folder for the run")
    target, folder = out.resolve(), spec.folder.resolve()
    if target == folder or folder in target.parents:
        raise CollectError(f"--out {out}: lies inside the input folder {spec.folder}; traceql never writes into "
                           "its inputs: choose a place outside it")


def _run_dir(spec: InputSpec, opts: ProfilerOptions, out: Path | None, shared: bool) -> Path:
    run = out or Path("runs") / f"{spec.name}-{opts.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    if shared:  # mpirun/srun: every rank runs this, on one shared folder
        if out is None:
            raise CollectError("--launcher env needs --out (the same folder for every rank)")
    elif run.exists() and any(run.iterdir()) and not (run / "results").exists():
        raise CollectError(f"{run}: exists and is not empty; choose another --out")
    if not shared and ((run / "manifest.json").exists() or (run / "results").exists()):
        raise CollectError(f"{run}: holds an earlier collection; choose another --out")
    for sub in ("logs", "results", "traces"):
        (run / sub).mkdir(parents=True, exist_ok=True)
    return run


def _check_options(opts: ProfilerOptions, lopts: LaunchOptions, world: int) -> tuple[list[int], int]:
    """The ranks to profile and the isolated steps to run, once the options are known to fit the run."""
    if lopts.launcher == "env":
        check_env_ranks(world)
    if world % lopts.nnodes:
        raise CollectError(f"world_size {world} is not a multiple of --nnodes {lopts.nnodes}")
    if lopts.nnodes > 1 and not lopts.rdzv_endpoint and lopts.launcher == "torchrun":
        raise CollectError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node)")
    if opts.name in ("nsys", "ncu") and lopts.device == "cpu":
        raise CollectError(f"--profiler {opts.name} records NVIDIA GPU work, and --device cpu runs none (use "
                           "--profiler torch or none on CPU)")
    profile_ranks = sorted(set(lopts.profile_ranks if lopts.profile_ranks is not None else range(world)))
    if any(r < 0 or r >= world for r in profile_ranks):
        raise CollectError(f"--ranks {profile_ranks} outside 0..{world - 1} (world_size {world})")
    isolated = opts.isolated_for(world)
    if isolated > opts.isolated_slots():
        raise CollectError(f"--isolated-steps {isolated}: each runs before a window step the profiler records, "
                           f"but its first; this window has {opts.isolated_slots()} (more with --steps)")
    return profile_ranks, isolated


def runtime(spec: InputSpec, extra: dict[str, str] | None = None, *, one_gpu: bool = False,
            ) -> tuple[dict[str, str], str, dict[str, Any]]:
    """What a child running the input's model gets: its environment (the collectors importable, the input's
    ``cuda_visible_devices`` — only the first with ``one_gpu`` — and ``extra``), the input's Python, and what
    probing that Python found (checked against ``cuda_version_check``)."""
    env = {**os.environ, **(extra or {}),
           "PYTHONPATH": os.pathsep.join(filter(None, [CHILD_PATH, os.environ.get("PYTHONPATH")]))}
    visible = spec.global_.get("cuda_visible_devices")
    if visible:
        env["CUDA_VISIBLE_DEVICES"] = visible.split(",")[0] if one_gpu else visible
    python = spec.global_.get("python_path") or sys.executable
    info = probe_python(python, env)
    check_cuda_version(info, spec.global_.get("cuda_version_check"))
    return env, python, info


def _driver_command(spec: InputSpec, run: Path, opts: ProfilerOptions, lopts: LaunchOptions, python: str,
                    profile_ranks: list[int], isolated: int) -> list[str]:
    local = spec.local
    torch_args = [f"--torch-{k}={getattr(opts, 'torch_' + k.replace('-', '_'))}"
                  for k in ("wait", "warmup", "active", "repeat", "skip-first")]
    driver = [python, "-m", "traceql.collectors.driver"]
    if spec.train_script is not None:  # the user's driver; it gets our settings in TRACEQL_DRIVER_ARGS
        driver = [python, str(spec.train_script.resolve())]
    return [*driver, "--input", str(spec.folder.resolve()), "--run", str(run.resolve()),
            "--run-name", run.name, "--profiler", opts.name, "--profile-ranks", ",".join(map(str, profile_ranks)),
            "--device", lopts.device, "--window-steps", str(opts.window_steps), "--isolated-steps", str(isolated),
            "--epochs", str(local["epochs"]),
            "--batchsize", str(local["batchsize"]), "--cap-size", str(local["cap_size"]), *torch_args,
            "--accumulation-steps", str(local.get("accumulation_steps", 1)),
            "--virtual-workers", str(local.get("virtual_workers", 1)), *straggler_args(local)]


def straggler_args(local: dict[str, Any]) -> list[str]:
    """The driver's ``--straggler``, ``--gpu-delay`` (``RANK:STEPS:MS``) and ``--comm`` for local_config's
    ``straggler``, ``gpu_delay`` and ``comm`` (none of those it lacks)."""
    out = ["--comm", local["comm"]] if local.get("comm") else []
    for key, flag, length in (("straggler", "--straggler", "sleep_ms"), ("gpu_delay", "--gpu-delay", "ms")):
        if local.get(key):
            late = local[key]
            out += [flag, f"{late['rank']}:{','.join(str(i) for i in late['steps'])}:{late[length]}"]
            if late.get("at", "start") != "start":
                out += ["--straggler-at", late["at"]]
    return out


def _launcher_command(python: str, spec: InputSpec, lopts: LaunchOptions, launch_json: Path) -> list[str]:
    world = spec.local["world_size"]
    cmd = [python, "-m", "torch.distributed.run", f"--nproc-per-node={world // lopts.nnodes}"]
    if lopts.nnodes == 1 and not lopts.rdzv_endpoint:
        cmd.append("--standalone")
    else:
        cmd += [f"--nnodes={lopts.nnodes}", f"--node-rank={lopts.node_rank}", f"--rdzv-endpoint={lopts.rdzv_endpoint}",
                f"--rdzv-id={lopts.rdzv_id}", f"--rdzv-backend={lopts.rdzv_backend}"]
    return [*cmd, "-m", "traceql.collectors.rankwrap", str(launch_json)]


def _wait(proc: subprocess.Popen, timeout: float | None, progress: Callable[[str], None] | None,
          run: Path, world: int) -> str:
    t0 = time.monotonic()
    while proc.poll() is None:
        elapsed = time.monotonic() - t0
        if timeout is not None and elapsed > timeout:
            stop(proc, run, grace=TIMEOUT_GRACE_S)
            return "timeout"
        if progress:
            done = sum(1 for r in manifest.read_results(run).values() if r.get("status") in ("ok", "failed"))
            progress(f"{elapsed:5.0f} s, {done}/{world} ranks finished")
        time.sleep(0.5)
    return "complete" if proc.returncode == 0 else "failed"


def collect(input_dir: str | Path, opts: ProfilerOptions, *, out: Path | None = None,
            launch: LaunchOptions | None = None, overrides: dict[str, Any] | None = None,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run one collection and return its manifest (also written to RUN/manifest.json).

    Raises CollectError, after writing the manifest, when a rank failed or the run timed out, or when it was
    interrupted while the ranks ran (Ctrl-C, SIGTERM: every rank is stopped first; stage ``interrupted``).
    Interrupted before anything started, it raises KeyboardInterrupt as ever (:class:`Interrupted` for
    SIGTERM)."""
    interrupts = Interrupts()
    with interrupts.installed():
        return _collect(input_dir, opts, out=out, launch=launch, overrides=overrides, progress=progress,
                        interrupts=interrupts)


def _collect(input_dir: str | Path, opts: ProfilerOptions, *, out: Path | None, launch: LaunchOptions | None,
             overrides: dict[str, Any] | None, progress: Callable[[str], None] | None,
             interrupts: Interrupts) -> dict[str, Any]:
    lopts = launch or LaunchOptions()
    spec = load_input(input_dir, overrides)
    world = spec.local["world_size"]
    profile_ranks, isolated = _check_options(opts, lopts, world)
    _check_out(spec, out)
    env, python, info = runtime(spec, lopts.env)
    binary = find_binary(opts.name, spec.global_.get(f"{opts.name}_path")) if opts.name in ("nsys", "ncu") else None
    gpus = info.get("gpus", 0)
    device = lopts.device if lopts.device != "auto" else ("cuda" if gpus else "cpu")
    if device == "cuda" and not gpus:
        raise CollectError("no GPU visible to torch: NCCL needs NVIDIA GPUs (use --device cpu for gloo on CPU)",
                           stage="environment")
    if opts.name in ("nsys", "ncu") and device != "cuda":
        raise CollectError(f"--profiler {opts.name} records NVIDIA GPU work, and this run has no GPU "
                           "(use --profiler torch or none on CPU)", stage="environment")
    if spec.local.get("gpu_delay") and device != "cuda":
        raise CollectError("gpu_delay spins a GPU, and this run has none (--device cpu or no GPU visible): "
                           "use straggler (a CPU sleep) on CPU", stage="environment")
    if device == "cuda" and lopts.launcher == "torchrun" and world // lopts.nnodes > gpus:
        raise CollectError(f"world_size {world} needs {world // lopts.nnodes} GPUs on this node; {gpus} visible",
                           stage="environment")
    cpu_ranks = max(8, 4 * (os.cpu_count() or 1))  # gloo ranks one node runs: past it, it would only thrash
    if device == "cpu" and lopts.launcher == "torchrun" and world // lopts.nnodes > cpu_ranks:
        raise CollectError(f"world_size {world} starts {world // lopts.nnodes} CPU ranks on this node; it runs at "
                           f"most {cpu_ranks} (4 a core)", stage="environment")
    version = tool_version(binary) if binary else None
    run = _run_dir(spec, opts, out, shared=lopts.launcher == "env")
    lopts.device = device
    command = _driver_command(spec, run, opts, lopts, python, profile_ranks, isolated)
    launch_spec = {"run": str(run.resolve()), "run_name": run.name, "profiler": opts.to_dict(),
                   "binary": str(binary) if binary else None, "profile_ranks": profile_ranks, "command": command,
                   "env": {"TRACEQL_RUN_DIR": str(run.resolve()), "TRACEQL_PROFILER": opts.name,
                           "TRACEQL_PROFILE_RANKS": ",".join(map(str, profile_ranks)),
                           "TRACEQL_DRIVER_ARGS": json.dumps(command[3 if spec.train_script is None else 2:])}}
    launch_json = write_json(run / "launch.json", launch_spec)
    base = {"input": {"path": str(spec.folder.resolve()), "local_config": spec.local, "global_config": spec.global_,
                      "train_script": spec.train_script is not None},
            "profiler": {**opts.to_dict(), "isolated_steps": isolated, "binary": str(binary) if binary else None,
                         "version": version},
            "launcher": {"kind": lopts.launcher, "nnodes": lopts.nnodes, "node_rank": lopts.node_rank,
                         "rdzv_endpoint": lopts.rdzv_endpoint},
            "environment": info, "device": device, "world_size": world, "profile_ranks": profile_ranks,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "run_name": run.name}
    files: list[Path] = []
    my_rank = rank_from_env()[0] if lopts.launcher == "env" else None
    try:  # Ctrl-C, SIGTERM from here on: what runs is stopped, the manifest written, then the error
        status, exit_codes = run_ranks(spec, lopts, python, launch_json, run, env, progress,
                                       launcher_command=_launcher_command, wait=_wait, interrupts=interrupts)
        for rank in profile_ranks if my_rank is None else [r for r in profile_ranks if r == my_rank]:
            try:
                files += postprocess(opts, binary, run / "traces" / f"{run.name}_rank{rank}")
            except CollectError as exc:
                status = "failed"
                base["postprocess_error"] = str(exc)
    except KeyboardInterrupt as exc:  # run_ranks has stopped what it started (postprocess: subprocess.run)
        interrupts.defer()
        status, exit_codes = "interrupted", exit_codes_of(run, world)
        base["interrupted"] = {"signal": getattr(exc, "signal", "SIGINT"), "left_running": interrupts.left}
    interrupts.defer()  # a signal from here on cannot stop the manifest from being written
    if my_rank not in (None, 0):  # under mpirun/srun rank 0 writes the manifest
        if status == "interrupted":
            raise CollectError(f"{run}: rank {my_rank} interrupted ({base['interrupted']['signal']}); "
                               f"{_stopped(base['interrupted'], 'its process')}", stage="interrupted")
        return {"rank": my_rank, "status": status, "run": str(run)}
    files += [run / f for r in manifest.read_results(run).values() for f in r.get("files", [])]
    result = manifest.build(run, base, status, exit_codes, files)
    manifest.write(run, result)
    _raise_for(run, result)
    return result


def _stopped(interrupted: dict[str, Any], what: str) -> str:
    left = interrupted.get("left_running") or []
    return f"{what} stopped" if not left else f"pid(s) {', '.join(map(str, left))} still running after SIGKILL"


def _log_list(run: Path, ranks: list[dict[str, Any]], most: int = 4) -> str:
    logs = [str(run / r["log"]) for r in ranks]
    more = f" and {len(logs) - most} more in {run / 'logs'}" if len(logs) > most else ""
    return ", ".join(logs[:most]) + more


def _one_line(text: str, most: int = 300) -> str:
    line = next((x.strip() for x in str(text).splitlines() if x.strip()), "")
    return line if len(line) <= most else line[:most - 1] + "…"


def _why(run: Path, rank: dict[str, Any]) -> str:
    """How a rank failed, in one line: its exception and where in the user's code, and its log."""
    log = f"log: {run / rank['log']}"
    crash = manifest.crash_of(run, rank["rank"]) if rank["status"] != "failed" else None
    if crash:
        return f"it died: {crash} ({log})"
    if not rank.get("error"):
        ended = "before writing a result" if rank["status"] == "missing" else "without writing its result"
        return f"it ended {ended} ({log})"
    at = rank.get("error_at")
    where = f"{at['file']}:{at['line']} in {at['function']}; " if isinstance(at, dict) else ""
    return f"{_one_line(rank['error'])} ({where}{log})"


def _raise_for(run: Path, result: dict[str, Any]) -> None:
    """The one-line error of a run that did not complete (its manifest is written already)."""
    status = result["status"]
    if status == "complete":
        return
    bad = [r for r in result["ranks"] if r["status"] != "ok"]
    if status == "interrupted":
        how = result.get("interrupted") or {}
        raise CollectError(f"{run}: interrupted ({how.get('signal', 'SIGINT')}); {_stopped(how, 'every rank')} "
                           "(manifest.json status 'interrupted')", stage="interrupted")
    if status == "timeout":
        names = ", ".join(str(r["rank"]) for r in bad) or "none"
        logs = f" (logs: {_log_list(run, bad)})" if bad else ""
        raise CollectError(f"{run}: timed out; ranks not finished: {names}{logs}; every rank stopped "
                           "(manifest.json status 'timeout')", stage="run")
    if not bad and result.get("postprocess_error"):
        raise CollectError(f"{run}: {result['postprocess_error']}", stage="run")
    if not bad or all(r["status"] == "missing" for r in result["ranks"]):  # no rank started: the launcher's log
        launcher_log = run / "logs" / "launcher.log"
        raise CollectError(f"{run}: the launcher failed (log: {launcher_log})",
                           detail=manifest.log_tail(run, "launcher"), stage="run")
    # a rank that died of a signal is the cause, else the rank that failed first; the others usually fail in a
    # collective after it (a peer's connection reset)
    first = min(bad, key=lambda r: (r["status"] == "failed" or manifest.crash_of(run, r["rank"]) is None,
                                    r["status"] != "failed", r["finished"] or float("inf")))
    others = [str(r["rank"]) for r in bad if r is not first]
    also = f" (then rank(s) {', '.join(others)} stopped too)" if others else ""
    raise CollectError(f"{run}: rank {first['rank']} failed: {_why(run, first)}{also}", stage="run")
