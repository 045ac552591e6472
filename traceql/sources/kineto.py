"""torch.profiler (Kineto) Chrome-trace JSON → the normalized model.

One file per rank. Only GPU activity (kernels, copies, memsets), annotations, runtime launches and the trace's
metadata are kept, as columns: ``kineto_decode`` reads them, or ``kineto_events`` where it cannot. Timestamps
(µs with ns decimals) become int64 ns from their text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from traceql.model.engine import Model, insert_frame
from traceql.model.names import collective_expr, kind_expr, short_names
from traceql.sources.files import InputFile, by_run
from traceql.sources.json_stream import BOM
from traceql.sources.kineto_decode import peek_meta
from traceql.sources.kineto_file import SHAPE, KinetoFile, assign, ns_from_text, parse  # noqa: F401 - parse: the reader's
from traceql.sources.kineto_helpers import Helpers
from traceql.sources.kineto_plan import RunPlan, plan  # noqa: F401 - the reader's plan: sources.shards asks it

FORMAT = "kineto-json"
COPY_KIND = re.compile(r"^Memcpy (\w+)")


def sniff(head: bytes, path: Path) -> bool:
    """A JSON object (after a UTF-8 byte order mark, if any), or gzip (a ``.json.gz`` trace): what torch.profiler
    writes, whatever the file's name."""
    return head.startswith(b"\x1f\x8b") or head.removeprefix(BOM).lstrip()[:1] == b"{"


def loose_runs(loose: list[Path]) -> list[list[Path]]:
    """Loose traces given together are one run, as :func:`load` reads them (their ranks: :func:`assign`),
    where they can be of one job: split by what their metadata say of their job (:func:`_jobs`)."""
    return list(_jobs(loose).values())


def loose_note(loose: list[Path]) -> str | None:
    """One line naming the jobs loose traces given together were split into (:func:`loose_runs`), if several."""
    jobs = _jobs(loose)
    if len(jobs) < 2:
        return None
    said = "; ".join(f"{', '.join(p.name for p in files)}: " + (
        f"{key[0]} ranks on {', '.join(key[1]) or 'unnamed GPUs'}" if key is not None else "no job recorded")
        for key, files in jobs.items())
    return f"note: traces of {len(jobs)} jobs given together, each taken as a run of its own ({said})"


def _jobs(loose: list[Path]) -> dict[tuple[Any, tuple[str, ...]] | None, list[Path]]:
    """Loose traces by their job, as their metadata tell it (``distributedInfo``'s world size and
    ``deviceProperties``' GPU names, read from the file's first bytes): files of one job agree on both; a
    file whose metadata follow its events (or are absent) goes with the others like it."""
    jobs: dict[tuple[Any, tuple[str, ...]] | None, list[Path]] = {}
    for path in loose:
        meta = peek_meta(path)
        key = None
        if meta is not None:
            info = meta.get("distributedInfo") or {}
            gpus = meta.get("deviceProperties") or []
            key = (info.get("world_size") if isinstance(info, dict) else None,
                   tuple(sorted({str(g.get("name")) for g in gpus if isinstance(g, dict) and g.get("name")})))
        jobs.setdefault(key, []).append(path)
    return jobs


def _name_classes(con: duckdb.DuckDBPyConnection, shorts: pl.DataFrame) -> pl.DataFrame:
    """Each distinct short name's kind (comm or compute) and collective, by the model's SQL, once per name."""
    con.register("_names", shorts.select(pl.col("short_name").unique()).to_arrow())
    try:
        return con.execute(f"SELECT short_name, {kind_expr('short_name')} AS name_kind, "
                           f"{collective_expr('short_name')} AS collective FROM _names").pl()
    finally:
        con.unregister("_names")


def _gpu_frame(con: duckdb.DuckDBPyConnection, f: KinetoFile, run_id: str, rank: int) -> pl.DataFrame:
    g = f.gpu
    shorts = short_names(g["name"]).cast({"name": pl.String, "short_name": pl.String})  # typed when empty
    shorts = shorts.join(_name_classes(con, shorts), on="short_name", how="left", maintain_order="left")
    launches = (
        f.launches.select(pl.col("correlation").cast(pl.Int64, strict=False), ns_from_text("ts").alias("launch_ns"))
        .group_by("correlation").agg(pl.col("launch_ns").min())
    )
    start = ns_from_text("ts")
    g = g.with_columns(pl.col("correlation").cast(pl.Int64, strict=False))
    g = g.join(shorts, on="name", how="left", maintain_order="left")
    return g.join(launches, on="correlation", how="left", maintain_order="left").with_columns(
        pl.lit(run_id).alias("run_id"), pl.lit(rank, pl.Int32).alias("rank"),
        start.alias("start_ns"), (start + ns_from_text("dur")).alias("end_ns"),
        ns_from_text("dur").alias("duration_ns"),
    )


def _load_file(model: Model, f: KinetoFile, run_id: str, rank: int, rank_from: str) -> None:
    """Put one parsed trace into the model as rank ``rank`` of run ``run_id``."""
    con = model.con
    cupti = f.meta.get("cupti_version")
    con.execute("INSERT INTO runs VALUES (?, 'kineto', ?, ?, ?, ?, ?)",
                [run_id, str(f.path), f"torch.profiler (CUPTI {cupti})" if cupti else "torch.profiler",
                 str(f.meta.get("schemaVersion", "")) or None, [rank], f.path.stat().st_size])
    # Kineto's times are the host's clock in every rank's file: no offset
    pid = f.pid if f.pid is not None and -(2**63) <= f.pid < 2**63 else None  # a pid past int64 is no process id
    con.execute("INSERT INTO ranks VALUES (?, ?, ?, ?, ?, 0)", [run_id, rank, str(f.path), pid, rank_from])
    _annotations(con, f, run_id, rank)
    if not f.gpu.height:  # a collection on CPU: no GPU activity to load
        return
    g = _gpu_frame(con, f, run_id, rank)
    # integers stay 64-bit: the model narrows them to its types, and says what does not fit
    kernels = g.filter(pl.col("kind").is_in(["kernel", "sync"])).with_columns(
        *(pl.col(c).cast(pl.Int64, strict=False) for c in SHAPE),
        pl.col("device").cast(pl.Int64, strict=False), pl.col("stream").cast(pl.Int64, strict=False),
        pl.col("registers").cast(pl.Int64, strict=False),
        pl.col("shared").cast(pl.Int64, strict=False).alias("shared_mem"),
        pl.col("correlation").cast(pl.Int64, strict=False).alias("correlation_id"),
        pl.col("name", "short_name").cast(pl.Categorical),
        pl.when(pl.col("kind") == "sync").then(pl.lit("sync"))
        .otherwise(pl.col("name_kind").fill_null("compute")).alias("kind"),
        pl.when((pl.col("kind") == "kernel") & (pl.col("name_kind") == "comm")).then(pl.col("collective"))
        .alias("collective"),
    )
    model.add("kernels", kernels)
    mem = g.filter(pl.col("kind").is_in(["memcpy", "memset"])).with_columns(
        pl.col("device").cast(pl.Int64, strict=False), pl.col("stream").cast(pl.Int64, strict=False),
        pl.col("bytes").cast(pl.Int64, strict=False),
        pl.when(pl.col("kind") == "memset").then(pl.lit("Memset"))
        .otherwise(pl.col("name").str.extract(COPY_KIND.pattern, 1).fill_null("Unknown")).alias("copy_kind"),
        pl.col("correlation").cast(pl.Int64, strict=False).alias("correlation_id"),
    )
    model.add("memcpy", mem)
    _gpus(con, f, run_id, kernels["device"])


def _number(value: Any, bits: int = 32) -> int | None:
    """An integer property as the model's column takes it: None for anything else, or out of its range."""
    ok = isinstance(value, int) and not isinstance(value, bool) and -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    return value if ok else None


def _gpus(con: duckdb.DuckDBPyConnection, f: KinetoFile, run_id: str, devices: pl.Series) -> None:
    """The GPUs a trace's kernels ran on, with what its ``deviceProperties`` say of them (what is not of the
    expected type left NULL)."""
    listed = f.meta.get("deviceProperties")
    props = {p.get("id"): p for p in (listed if isinstance(listed, list) else [])
             if isinstance(p, dict) and _number(p.get("id")) is not None}
    for dev in sorted(d for d in devices.drop_nulls().unique().to_list() if _number(d) is not None):
        p = props.get(dev, {})
        major, minor = _number(p.get("computeMajor")), _number(p.get("computeMinor"))
        cc = f"{major}.{minor}" if major is not None and minor is not None else None
        name = p.get("name") if isinstance(p.get("name"), str) else None
        con.execute("INSERT INTO gpus SELECT ?, ?, ?, ?, ?, NULL, NULL, ?, NULL WHERE NOT EXISTS "
                    "(SELECT 1 FROM gpus WHERE run_id = ? AND device = ?)",
                    [run_id, dev, name, _number(p.get("numSms")), _number(p.get("totalGlobalMem"), 64), cc,
                     run_id, dev])


def _annotations(con: duckdb.DuckDBPyConnection, f: KinetoFile, run_id: str, rank: int) -> None:
    notes = f.notes
    if notes.height:
        start = ns_from_text("ts")
        insert_frame(con, "nvtx", notes.select(
            pl.lit(run_id).alias("run_id"), pl.lit(rank, pl.Int32).alias("rank"), start.alias("start_ns"),
            (start + ns_from_text("dur")).alias("end_ns"), pl.col("name").alias("text"), pl.col("cat").alias("domain")))


def load(model: Model, files: list[InputFile], run_plan: RunPlan | None = None) -> list[str]:
    """Put Kineto traces into the model: each run's files are parsed (:func:`parse`) and loaded as its ranks;
    the warnings on what could not be used are returned. With ``run_plan`` (``kineto_plan``), ``files`` are some
    traces of its run, given the run's ranks."""
    notes: list[str] = []
    for run, group in by_run(files).items():
        if run_plan is not None and run_plan.helpers is not None:
            parsed = [run_plan.helpers.parse(f.path) for f in group]
        else:
            with Helpers([(f.path, f.cpu_run) for f in group]) as helpers:
                parsed = [helpers.parse(f.path) for f in group]
        if run_plan is None:
            assigned, said = assign(parsed, run)
        else:
            assigned = [(kf, *run_plan.ranks[kf.path]) for kf in parsed]
            said = [n for kf in parsed for n in run_plan.notes.get(kf.path, [])]
        notes += said
        for kf, run_id, rank, how in assigned:
            _load_file(model, kf, run_id, rank, how)
    return notes
