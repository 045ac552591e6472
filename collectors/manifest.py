"""manifest.json: what a collection ran, with what, where its files are and how each rank ended."""

from __future__ import annotations

import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

from traceql.collectors.files import write_json

FORMAT = "traceql-run/1"
FORMAT_PREFIX = FORMAT.split("/")[0] + "/"  # any version of the run folder format


def read(run: Path) -> dict[str, Any] | None:
    """The manifest of a run folder; None when ``run`` is not one (no manifest, not ours, unreadable)."""
    try:
        data = json.loads((Path(run) / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    ok = isinstance(data, dict) and str(data.get("format", "")).startswith(FORMAT_PREFIX)
    return data if ok else None


def read_results(run: Path) -> dict[int, dict[str, Any]]:
    out = {}
    for path in sorted((run / "results").glob("rank*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        out[int(data.get("rank", path.stem[4:]))] = data
    return out


def log_tail(run: Path, rank: int | str, lines: int = 15) -> str:
    """The last ``lines`` lines of a rank's log (``rank`` a number), or of ``logs/<rank>.log`` (a name)."""
    path = run / "logs" / (f"rank{rank}.log" if isinstance(rank, int) else f"{rank}.log")
    if not path.exists():
        return "(no log)"
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


FATAL = "Fatal Python error: "  # what the fault handler writes first when a rank dies of a signal
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)')


def crash_of(run: Path, rank: int) -> str | None:
    """How a rank died of a signal, in a few words, from the fault handler's report at the end of its log
    (``rankwrap`` turns it on): the fatal error, the line the C library printed just before it where there is
    one, and the innermost Python frame; None where the log holds no such report."""
    lines = log_tail(run, rank, lines=200).splitlines()
    at = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith(FATAL)), None)
    if at is None:
        return None
    what = lines[at][len(FATAL):].strip()
    before = lines[at - 1].strip() if at and lines[at - 1].strip() and not lines[at - 1].startswith("[") else ""
    frame = next((m for m in map(_FRAME.match, lines[at + 1:]) if m), None)
    where = f" in {Path(frame[1]).name}:{frame[2]} {frame[3]}" if frame else ""
    return f"{what}{f' ({before})' if before else ''}{where}"


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 3) if xs else None


def step_summary(result: dict[str, Any]) -> dict[str, Any]:
    """Step times of a rank: the window's normal steps, the steps outside it (last epoch), every untraced step
    (the normal steps outside the window but the run's first, in order: outside the capture they run at the
    speed of a run without the profiler), and what the isolated steps cost: their median and their total as a
    share of the window's normal steps."""
    times = result.get("step_times_ms") or []
    normal = [t for t in times if not t.get("isolated")]
    window = [t["ms"] for t in normal if t.get("window")]
    isolated = [t["ms"] for t in times if t.get("isolated")]
    last_epoch = max((t["epoch"] for t in times), default=None)
    unprofiled = [t["ms"] for t in normal if not t.get("window") and t["epoch"] == last_epoch]
    untraced = [t["ms"] for t in normal[1:] if not t.get("window")]  # the first: warm-up
    cost = round(100 * sum(isolated) / sum(window), 2) if isolated and window else None
    return {"steps": len(normal), "window_median_ms": _median(window), "outside_window_median_ms": _median(unprofiled),
            "window_ms": [round(x, 3) for x in window], "untraced_ms": [round(x, 3) for x in untraced],
            "isolated_steps": len(isolated), "isolated_median_ms": _median(isolated), "isolated_cost_pct": cost}


def build(run: Path, base: dict[str, Any], status: str, exit_codes: dict[int, int | None],
          files: list[Path]) -> dict[str, Any]:
    results = read_results(run)
    ranks = []
    for rank in range(base["world_size"]):
        res = results.get(rank, {})
        state = res.get("status", "missing")
        if status == "interrupted" and state == "running":  # stopped by the interrupt
            state = "interrupted"
        ranks.append({"rank": rank, "status": state, "exit_code": exit_codes.get(rank),
                      "error": res.get("error"), "error_at": res.get("error_at"), "finished": res.get("finished"),
                      "log": f"logs/rank{rank}.log",
                      "profiled": rank in base["profile_ranks"] and base["profiler"]["name"] != "none",
                      "device": res.get("device"),
                      "versions": res.get("versions"), "window": res.get("window"), **step_summary(res)})
    traces = [str(p.relative_to(run)) for p in files if p.suffix in {".sqlite", ".csv"} or p.name.endswith(".json.gz")]
    others = [str(p.relative_to(run)) for p in files if str(p.relative_to(run)) not in traces]
    extra = sorted(str(p.relative_to(run)) for p in (run / "traces").rglob("*") if p.is_file()
                   and str(p.relative_to(run)) not in traces + others)
    return {**base, "format": FORMAT, "status": status, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "ranks": ranks, "notes": sorted({r["note"] for r in results.values() if r.get("note")}),
            "files": {"traces": traces, "other": others + extra,
                                      "logs": sorted(str(p.relative_to(run)) for p in (run / "logs").glob("*.log"))}}


def write(run: Path, manifest: dict[str, Any]) -> Path:
    return write_json(run / "manifest.json", manifest)
