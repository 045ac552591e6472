"""`traceql collect`: run a training input folder on this node's GPUs (or CPUs) under a profiler."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from traceql.cli.common import console, guarded, spinner, table
from traceql.cli.say import notes

NSYS, NCU, TORCH, LAUNCH = "nsys", "ncu", "torch.profiler", "Launch"


def _opt(help: str, panel: str | None = None, *names: str) -> Any:
    return typer.Option(*names, help=help, rich_help_panel=panel)


@guarded
def collect(
    input_dir: Annotated[Path, typer.Argument(help="folder with define_model.py, local_config.json")],
    profiler: Annotated[str, _opt("nsys, ncu, torch or none", None, "--profiler", "-p")] = "none",
    out: Annotated[Path | None, _opt("run folder (runs/NAME-PROFILER-TIME)", None, "--out", "-o")] = None,
    steps: Annotated[int, _opt("profiled steps in the middle of the last epoch (nsys, ncu)")] = 5,
    isolated_steps: Annotated[int | None, _opt("extra steps with communication off, the in-run reference "
                                               "(default 1 for nsys/torch on several ranks, else 0)")] = None,
    ranks: Annotated[str | None, _opt("ranks to profile, e.g. 0 or 0,4 (default all)")] = None,
    device: Annotated[str, _opt("auto, cuda (NCCL) or cpu (gloo)")] = "auto",
    timeout: Annotated[float | None, _opt("seconds before the whole run is stopped")] = None,
    set_: Annotated[list[str] | None, _opt("override local_config: --set cap_size=2", None, "--set")] = None,
    nsys_trace: Annotated[str, _opt("nsys -t", NSYS)] = "cuda,nvtx",
    nsys_args: Annotated[str, _opt("more nsys profile options", NSYS)] = "-s none --cpuctxsw none",
    ncu_kernel: Annotated[str | None, _opt("profile kernels whose name matches this regex", NCU)] = None,
    ncu_launch_skip: Annotated[int, _opt("ncu --launch-skip (within the window)", NCU)] = 0,
    ncu_launch_count: Annotated[int, _opt("ncu --launch-count", NCU)] = 50,
    ncu_args: Annotated[str, _opt("more ncu options", NCU)] = "",
    torch_wait: Annotated[int, _opt("schedule wait", TORCH)] = 1,
    torch_warmup: Annotated[int, _opt("schedule warmup", TORCH)] = 1,
    torch_active: Annotated[int, _opt("schedule active", TORCH)] = 3,
    torch_repeat: Annotated[int, _opt("schedule repeat", TORCH)] = 1,
    torch_skip_first: Annotated[int, _opt("schedule skip_first", TORCH)] = 0,
    launcher: Annotated[str, _opt("torchrun, or env: ranks started by mpirun/srun", LAUNCH)] = "torchrun",
    nnodes: Annotated[int, _opt("nodes (torchrun rendezvous)", LAUNCH)] = 1,
    node_rank: Annotated[int, _opt("this node's rank (torchrun)", LAUNCH)] = 0,
    rdzv_endpoint: Annotated[str | None, _opt("torchrun rendezvous HOST:PORT", LAUNCH)] = None,
    rdzv_id: Annotated[str, _opt("torchrun rendezvous id", LAUNCH)] = "traceql",
    rdzv_backend: Annotated[str, _opt("torchrun rendezvous backend", LAUNCH)] = "c10d",
) -> None:
    """Run the training in INPUT_DIR on this node's GPUs (or CPUs) under a profiler; write a run folder."""
    settings = dict(locals())  # the profiler and launch settings, by their option names
    from traceql.commands.collect import collect as run_collect

    for name in ("input_dir", "out", "ranks", "set_"):
        settings.pop(name)
    with spinner("collecting…") as update:
        manifest = run_collect(input_dir, out=out, ranks=ranks, overrides=set_, progress=update, **settings)
    print_manifest(manifest)


def print_manifest(manifest: dict[str, Any]) -> None:
    """What a finished collection produced."""
    if "ranks" not in manifest:  # a non-lead rank under mpirun/srun
        console.print(f"rank {manifest['rank']}: {manifest['status']} ({manifest['run']})")
        return
    run = manifest.get("run_name", "")
    console.print(f"[bold]{run}[/bold]: {manifest['status']}, {manifest['world_size']} ranks on "
                  f"{manifest['device']}, profiler {manifest['profiler']['name']}")
    ranks = table("Ranks (step times: medians)", ("rank", "status", "profiled", "steps", "window", "outside",
                                                  "isolated steps"), left={"status"})
    for r in manifest["ranks"]:
        n = r.get("isolated_steps") or 0
        isolated = f"{n}: {r['isolated_median_ms']} ms, +{r['isolated_cost_pct']} %" if n else "-"
        ranks.add_row(str(r["rank"]), r["status"], "yes" if r["profiled"] else "no", str(r["steps"]),
                      f"{r['window_median_ms']} ms", f"{r['outside_window_median_ms']} ms", isolated)
    console.print(ranks)
    notes(manifest.get("notes", []))
    for kind in ("traces", "other"):
        if manifest["files"][kind]:
            console.print(f"{kind}: " + ", ".join(manifest["files"][kind]))
