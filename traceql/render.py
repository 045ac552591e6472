"""Rendering results for a terminal (rich tables) — presentation only, no analysis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:  # polars loads with the analysis, not for `traceql collect`
    import polars as pl


def ms(ns: int | float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.3f} ms"


def _short(text: Any, width: int = 70) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= width else s[: width - 1] + "…"


def frame_table(df: pl.DataFrame, *, title: str | None = None, limit: int = 50) -> Table:
    """A rich table of the first ``limit`` rows of a frame."""
    table = Table(title=title, title_justify="left", show_lines=False)
    for col, dtype in zip(df.columns, df.dtypes, strict=True):
        table.add_column(col, justify="right" if dtype.is_numeric() else "left", overflow="fold")
    for row in df.head(limit).iter_rows():
        table.add_row(*("" if v is None else _short(v, 90) for v in row))
    return table


def print_frame(console: Console, df: pl.DataFrame, *, limit: int = 50) -> None:
    console.print(frame_table(df, limit=limit))
    if df.height > limit:
        console.print(f"… {df.height - limit} more rows (use --format csv/json/parquet or --output for all)")


def print_info(console: Console, info: dict[str, Any]) -> None:
    """The human form of :func:`traceql.info.trace_info`."""
    runs = Table(title="Runs", title_justify="left")
    for col in ("run_id", "path", "tool", "schema", "ranks"):
        runs.add_column(col)
    for r in info["runs"]:
        runs.add_row(r["run_id"], r["path"], f"{r['source']} {r['tool_version'] or '?'}",
                     r["schema_version"] or "?", ",".join(map(str, r["ranks"])))
    console.print(runs)

    ranks = Table(title="Ranks and GPUs", title_justify="left")
    for col in ("run_id", "rank", "pid", "rank from", "devices", "GPU", "capture span", "kernels"):
        ranks.add_column(col, justify="right" if col in {"rank", "pid", "kernels", "capture span"} else "left")
    gpu_names = {(g["run_id"], g["device"]): g["name"] or "unknown (no TARGET_INFO_GPU)" for g in info["gpus"]}
    for r in info["ranks"]:
        devs = r["devices"] or []
        names = sorted({gpu_names.get((r["run_id"], d), "?") for d in devs})
        ranks.add_row(r["run_id"], str(r["rank"]), str(r["pid"]), r["rank_from"], ",".join(map(str, devs)),
                      ", ".join(names), ms(r["span_ns"]), f"{r['kernels']:,}")
    console.print(ranks)

    k = info["kernels"]
    if not k["total"]:
        console.print("[bold]Kernels[/bold]: none — no GPU activity in these traces (a run on CPU?)")
        return
    kinds = ", ".join(f"{name} {n:,}" for name, n in k["by_kind"].items())
    devices = ", ".join(f"device {d}: {n:,}" for d, n in k["by_device"].items())
    console.print(f"[bold]Kernels[/bold]: {k['total']:,} ({kinds}); {devices}; GPU time {ms(k['total_ns'])}")
    m = info["memcpy"]
    console.print(f"[bold]Memory operations[/bold]: {m['total']:,} "
                  f"({', '.join(f'{n} {c:,}' for n, c in m['by_kind'].items()) or 'none'}); "
                  f"[bold]NVTX ranges[/bold]: {info['nvtx']['total']:,}")

    top = Table(title="Top kernels by GPU time", title_justify="left")
    for col in ("kernel", "kind", "count", "total", "mean", "% GPU time"):
        top.add_column(col, justify="left" if col in {"kernel", "kind"} else "right")
    for t in info["top_kernels"]:
        top.add_row(_short(t["short_name"]), t["kind"], f"{t['count']:,}", ms(t["total_ns"]),
                    ms(t["mean_ns"]), f"{t['pct']:.2f}")
    console.print(top)

    if info["collectives"]:
        coll = Table(title="Collectives (communication kernels)", title_justify="left")
        for col in ("collective", "count", "total"):
            coll.add_column(col, justify="left" if col == "collective" else "right")
        for c in info["collectives"]:
            coll.add_row(c["collective"] or "(unnamed)", f"{c['count']:,}", ms(c["total_ns"]))
        console.print(coll)
    else:
        console.print("[bold]Collectives[/bold]: none (no NCCL/RCCL/HCCL kernels in this trace)")


def print_detect(console: Console, result: Any) -> None:
    """The human form of :class:`traceql.detect.DetectResult`."""
    how = {"baseline": "paired: against the isolated baseline",
           "detector": "single trace: SlowdownDetector (no baseline given)"}.get(result.mode, "none: no GPU kernels")
    console.print(f"[bold]Slowdown detection[/bold] — labels {how}")
    if result.match_rate is not None:
        console.print(f"baseline signature match: {result.match_rate:.1%} of compute kernels")
    ranks = Table(title="Per rank", title_justify="left")
    cols = ("run_id", "rank", "comm/comp overlap", "compute", "comm", "memory", "idle", "span", "cases", "time lost")
    for col in cols:
        ranks.add_column(col, justify="left" if col == "run_id" else "right")
    for r in result.ranks.iter_rows(named=True):
        pct = "-" if r["comm_comp_overlap_pct"] is None else f"{r['comm_comp_overlap_pct']:.2f} %"
        ranks.add_row(r["run_id"], str(r["rank"]), pct, ms(r["compute_ns"]), ms(r["comm_ns"]), ms(r["memory_ns"]),
                      ms(r["idle_ns"]), ms(r["span_ns"]), f"{r['cases']:,}", ms(r["time_lost_ns"]))
    console.print(ranks)
    totals = result.to_dict()["totals"]
    console.print(f"[bold]{totals['cases']:,}[/bold] slowdown cases among {totals['compute_kernels']:,} compute "
                  f"kernels; time lost {ms(totals['time_lost_ns'])}")
    if result.top_signatures.is_empty():
        console.print("No slowdown cases.")
        return
    top = Table(title="Top slowed signatures (by time lost)", title_justify="left")
    for col in ("kernel", "grid / block", "cases", "of", "median ratio", "time lost", "next to"):
        top.add_column(col, justify="left" if col in {"kernel", "grid / block", "next to"} else "right")
    for t in result.top_signatures.iter_rows(named=True):
        shape = t["signature"][len(t["short_name"]):].strip()
        top.add_row(_short(t["short_name"], 60), shape, f"{t['cases']:,}", f"{t['instances']:,}",
                    f"{t['median_ratio']:.2f}x", ms(t["time_lost_ns"]), t["concurrent_comm"] or "-")
    console.print(top)


def print_manifest(console: Console, manifest: dict[str, Any]) -> None:
    """What a finished collection produced."""
    if "ranks" not in manifest:  # a non-lead rank under mpirun/srun
        console.print(f"rank {manifest['rank']}: {manifest['status']} ({manifest['run']})")
        return
    run = manifest.get("run_name", "")
    console.print(f"[bold]{run}[/bold]: {manifest['status']}, {manifest['world_size']} ranks on "
                  f"{manifest['device']}, profiler {manifest['profiler']['name']}")
    table = Table(title="Ranks", title_justify="left")
    for col in ("rank", "status", "profiled", "steps", "window median", "outside window"):
        table.add_column(col, justify="right" if col not in {"status"} else "left")
    for r in manifest["ranks"]:
        table.add_row(str(r["rank"]), r["status"], "yes" if r["profiled"] else "no", str(r["steps"]),
                      f"{r['window_median_ms']} ms", f"{r['outside_window_median_ms']} ms")
    console.print(table)
    for kind in ("traces", "other"):
        if manifest["files"][kind]:
            console.print(f"{kind}: " + ", ".join(manifest["files"][kind]))


def print_outcomes(console: Console, outcomes: list[Any]) -> None:
    """The closing table of `dataset add` / `dataset build`: added, skipped, failed."""
    table = Table(title="Dataset", title_justify="left")
    for col in ("entry", "status", "rows", "cases", "time lost", "note"):
        table.add_column(col, justify="right" if col in {"rows", "cases", "time lost"} else "left",
                         overflow="fold")
    for o in outcomes:
        table.add_row(o.name, o.status, f"{o.rows:,}", f"{o.cases:,}", ms(o.time_lost_ns), o.message)
    console.print(table)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("added", "skipped", "collected", "failed")}
    console.print(", ".join(f"{n} {s}" for s, n in counts.items() if n) or "nothing to do")
