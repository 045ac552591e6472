"""Nsight Systems SQLite exports → the normalized model.

An export is recognised by its SQLite header (``sqlite_header``); a report that was not exported is refused
with the command that exports it. Each export is ATTACHed read-only (``nsys_attach``); tables are found by
name (schemas drift between nsys versions), names are resolved through ``StringIds``, and all row work
happens inside DuckDB.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import duckdb
import polars as pl

from traceql.errors import InputError
from traceql.model.engine import Model
from traceql.sources import nsys_parts as parts
from traceql.sources import sqlite_header
from traceql.sources.files import InputFile, by_run
from traceql.sources.nsys_attach import READ_ERRORS, NsysFile, attach, detach, fail
from traceql.sources.nsys_kernels import launches, read_kernels, rows
from traceql.sources.nsys_plan import Part, RunPlan, offsets, plan  # noqa: F401 - the reader's plan: sources.shards asks it
from traceql.sources.ranks import RankAssignment, assign_ranks, name_rank_note, name_without_rank, rank_from_name

FORMAT = "nsys-sqlite"
REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")

NVTX_TYPES = (34, 59, 60)  # NvtxMark, NvtxPushPopRange, NvtxStartEndRange
NVTX_DOMAIN_CREATE = 75
STREAM_WAIT_EVENT = 2  # CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, where the export names no types
# CUPTI's memcpy kinds (stable enum values).
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
              9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD"}


def sniff(head: bytes, path: Path) -> bool:
    """A SQLite database, unless it is named .csv: the ncu reader claims every file so named."""
    return head.startswith(sqlite_header.MAGIC) and path.suffix.lower() != ".csv"


def check(file: InputFile, head: bytes, size: int) -> InputFile:
    """Refuse an export cut short; mark one in WAL mode, which :func:`load` reads from a copy."""
    sqlite_header.check_complete(file.path, head, size)
    return replace(file, wal=sqlite_header.in_wal_mode(head))


def refuse(head: bytes, path: Path) -> str | None:
    """Why a file no reader claims is refused: an nsys report (it must be exported to SQLite first), or a SQLite
    header that is corrupt; None for anything else."""
    if head.startswith(REPORT_MAGIC) or path.suffix in REPORT_SUFFIXES:
        # --include-blobs=true keeps NCCL's payloads: the collectives' sizes (``nsys_comms``)
        export = f"nsys export --type sqlite --include-blobs=true -o {path.with_suffix('.sqlite').name} {path.name}"
        return f"an Nsight Systems report, not its SQLite export; export it first: {export}"
    if head.startswith(b"SQLite format"):  # the magic's start, not the whole of it
        return "corrupt SQLite header"
    return None


def loose_runs(loose: list[Path]) -> list[list[Path]]:
    """The runs loose exports form: those whose names share a stem and carry distinct rank numbers
    (``gpt2_rank0.sqlite``, ``gpt2_rank1.sqlite``), first across folders, else within each folder."""
    runs: list[list[Path]] = []
    by_stem: dict[str, list[Path]] = {}
    for p in loose:
        by_stem.setdefault(name_without_rank(p), []).append(p)
    for group in by_stem.values():
        if _is_one_run(group):
            runs.append(group)
            continue
        by_folder: dict[Path, list[Path]] = {}
        for p in group:
            by_folder.setdefault(p.resolve().parent, []).append(p)
        runs += [mine for mine in by_folder.values() if _is_one_run(mine)]
    return runs


def _is_one_run(files: list[Path]) -> bool:
    ranks = [rank_from_name(p) for p in files]
    return len(files) > 1 and None not in ranks and len(set(ranks)) == len(files)


def _copy_kind_sql(col: str) -> str:
    cases = " ".join(f"WHEN {k} THEN '{v}'" for k, v in COPY_KINDS.items())
    return f"CASE {col} {cases} ELSE 'Unknown' END"


def _ranked(frame: pl.DataFrame, ranks: list[RankAssignment], f: NsysFile) -> pl.DataFrame:
    """``frame`` (with ``pid``) with the run id and rank of each row's process (new columns only: the frame
    itself is not copied)."""
    mine = [r for r in ranks if r.path == f.path]
    pids = [r.pid for r in mine]
    return frame.with_columns(
        pl.col("pid").replace_strict(pids, [r.run_id for r in mine], return_dtype=pl.String).alias("run_id"),
        pl.col("pid").replace_strict(pids, [r.rank for r in mine], return_dtype=pl.Int32).alias("rank"))


def _load_kernels(model: Model, f: NsysFile, kernels: pl.DataFrame, ranks: list[RankAssignment]) -> pl.DataFrame:
    """Add this export's kernels (:func:`_read_kernels`) to the model as their processes' ranks; returned
    for the devices they ran on."""
    kernels = _ranked(kernels, ranks, f)
    model.add("kernels", kernels)
    return kernels


def _load_memops(model: Model, f: NsysFile, part: Part | None) -> None:
    a = f.alias
    launch, launch_join = launches(f)
    join = f"JOIN _rankmap m ON m.alias = '{a}' AND m.pid = coalesce(t.globalPid, 0) {launch_join} " \
           f"WHERE {parts.where(part, f)}"
    head = """m.run_id, m.rank, t.deviceId AS device, t.streamId AS stream, t.start AS start_ns, t."end" AS end_ns,
              TRY(t."end" - t.start) AS duration_ns, t.bytes"""
    tail = f"t.correlationId AS correlation_id, {{}} AS kind, {launch} AS launch_ns"
    selects = []
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in f.tables:
        selects.append(f"""SELECT {head}, {_copy_kind_sql('t.copyKind')} AS copy_kind, {tail.format("'memcpy'")}
                           FROM {a}.CUPTI_ACTIVITY_KIND_MEMCPY t {join}""")
    if "CUPTI_ACTIVITY_KIND_MEMSET" in f.tables:
        selects.append(f"""SELECT {head}, 'Memset' AS copy_kind, {tail.format("'memset'")}
                           FROM {a}.CUPTI_ACTIVITY_KIND_MEMSET t {join}""")
    if selects:  # one query: DuckDB scans both tables at once (the model sorts the rows after)
        model.add("memcpy", rows(model.con, " UNION ALL ".join(selects)))


def _load_nvtx(con: duckdb.DuckDBPyConnection, f: NsysFile) -> None:
    if "NVTX_EVENTS" not in f.tables:
        return
    a = f.alias
    text = "coalesce(n.text, s.value)" if "StringIds" in f.tables else "n.text"
    strings = f"LEFT JOIN {a}.StringIds s ON s.id = n.textId" if "StringIds" in f.tables else ""
    con.execute(f"""
        INSERT INTO nvtx
        WITH domains AS (
            SELECT DISTINCT domainId, text FROM {a}.NVTX_EVENTS WHERE eventType = {NVTX_DOMAIN_CREATE}
        )
        SELECT m.run_id, m.rank, n.start, coalesce(n."end", n.start), {text}, d.text
        FROM {a}.NVTX_EVENTS n
        JOIN _rankmap m ON m.alias = '{a}' AND (m.pid >> 24) = (n.globalTid >> 24)
        {strings}
        LEFT JOIN domains d ON d.domainId = n.domainId
        WHERE n.eventType IN {NVTX_TYPES}
    """)


def _load_waits(con: duckdb.DuckDBPyConnection, f: NsysFile) -> None:
    """The export's recorded stream waits (``waits``): each ``cudaStreamWaitEvent`` with the latest
    ``cudaEventRecord`` of its event before it, in the same process."""
    if not {"CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_CUDA_EVENT"} <= set(f.tables):
        return
    a = f.alias
    kind = str(STREAM_WAIT_EVENT)
    if "ENUM_CUPTI_SYNC_TYPE" in f.tables:
        kind = (f"coalesce((SELECT min(id) FROM {a}.ENUM_CUPTI_SYNC_TYPE WHERE name = "
                f"'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT'), {STREAM_WAIT_EVENT})")
    query = f"""
        INSERT INTO waits
        SELECT m.run_id, m.rank, w.streamId, w.correlationId, r.streamId, r.correlationId
        FROM {a}.CUPTI_ACTIVITY_KIND_SYNCHRONIZATION w
        JOIN _rankmap m ON m.alias = '{a}' AND m.pid = coalesce(w.globalPid, 0)
        ASOF JOIN {a}.CUPTI_ACTIVITY_KIND_CUDA_EVENT r
          ON r.globalPid = w.globalPid AND r.eventId = w.eventId AND w.correlationId > r.correlationId
        WHERE w.syncType = {kind}
    """
    try:
        con.execute(query)
    except (duckdb.BinderException, duckdb.ConversionException):
        pass  # tables of another shape than nsys writes: no recorded waits (the replay infers them)


def _load_gpus(con: duckdb.DuckDBPyConnection, f: NsysFile, kernels: pl.DataFrame) -> None:
    """The GPUs this export's kernels ran on, each once per run, with what the export says of them."""
    a = f.alias
    used = kernels.group_by("run_id", "device").len().drop("len")  # a device past 32 bits is none: the model says so
    con.register("_used", used.filter(pl.col("device").is_between(-(2**31), 2**31 - 1)).to_arrow())
    try:
        if "TARGET_INFO_GPU" in f.tables:
            con.execute(f"""
                INSERT INTO gpus
                WITH info AS (SELECT * FROM {a}.TARGET_INFO_GPU QUALIFY row_number() OVER (PARTITION BY id) = 1)
                SELECT u.run_id, u.device, g.name, TRY_CAST(g.smCount AS INTEGER), TRY_CAST(g.totalMemory AS BIGINT),
                       TRY_CAST(g.memoryBandwidth AS BIGINT), TRY_CAST(g.clockRate AS BIGINT),
                       g.computeMajor || '.' || g.computeMinor, g.busLocation
                FROM _used u LEFT JOIN info g ON g.id = u.device
                WHERE NOT EXISTS (SELECT 1 FROM gpus x WHERE x.run_id = u.run_id AND x.device = u.device)
            """)
        else:  # schema 3.25 exports may lack TARGET_INFO_GPU: devices are known, their properties are not
            con.execute("""
                INSERT INTO gpus SELECT u.run_id, u.device, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM _used u
                WHERE NOT EXISTS (SELECT 1 FROM gpus x WHERE x.run_id = u.run_id AND x.device = u.device)
            """)
    finally:
        con.unregister("_used")


def _load_run(model: Model, files: list[NsysFile], ranks: list[RankAssignment],
              kernels: dict[str, pl.DataFrame], offset: dict[Path, int], part: Part | None = None) -> None:
    """Put the attached exports of one run (their kernels already read, by alias) into the model, with
    ranks as assigned and their clock offsets; of a ``part`` of an export, also the communication kernels of
    its other windows beside its own, and (its first window) every activity of its ranks, narrow."""
    con = model.con
    con.execute("CREATE TEMP TABLE IF NOT EXISTS _rankmap (alias VARCHAR, pid BIGINT, run_id VARCHAR, rank INTEGER)")
    con.execute("DELETE FROM _rankmap")
    by_path = {f.path: f for f in files}
    con.executemany(
        "INSERT INTO _rankmap VALUES (?, ?, ?, ?)",
        [(by_path[r.path].alias, r.pid, r.run_id, r.rank) for r in ranks],
    )
    con.executemany(
        "INSERT INTO ranks VALUES (?, ?, ?, ?, ?, ?)",
        [(r.run_id, r.rank, str(r.path), (r.pid >> 24) & 0xFFFFFF, r.rank_from, offset[r.path]) for r in ranks],
    )
    for f in files:
        mine = [r for r in ranks if r.path == f.path]
        con.execute(
            "INSERT INTO runs VALUES (?, 'nsys', ?, ?, ?, ?, ?)",
            [mine[0].run_id, str(f.path), f.tool_version, f.schema_version,
             sorted(r.rank for r in mine), f.path.stat().st_size],
        )
        try:
            mine_kernels = kernels.pop(f.alias)
            if part is not None and part.window is not None:
                model.context.append(_ranked(parts.read_context(con, f, part, mine_kernels), ranks, f))
                if part.first:
                    model.activity = parts.read_activity(con, f, part)
            ranked = _load_kernels(model, f, mine_kernels, ranks)
            _load_memops(model, f, part)
            _load_nvtx(con, f)
            if part is None or part.window is None:  # what a replay of a whole rank reads
                _load_waits(con, f)
            _load_gpus(con, f, ranked)
            con.execute(f"DROP TABLE IF EXISTS _launch_{f.alias}")
            con.execute(f"DROP TYPE IF EXISTS _strings_{f.alias}")
        except READ_ERRORS as exc:
            raise fail(f.path, exc) from exc


def _ranks(run_plan: RunPlan | None, files: list[NsysFile], run: str | None,
           part: Part | None) -> tuple[list[RankAssignment], dict[Path, int]]:
    """The ranks and clock offsets of a run's attached exports: as their plan says (some of the run's exports
    read alone, or a ``part`` of one), else from them all."""
    if run_plan is None:
        return assign_ranks({f.path: f.pids for f in files}, run), offsets(files)
    mine = [r for f in files for r in run_plan.of(f.path) if part is None or part.pids is None or r.pid in part.pids]
    for f in files:
        if part is None and sorted(r.pid for r in run_plan.of(f.path)) != f.pids:
            raise InputError("its processes changed while it was read (a file being written?)", path=str(f.path))
    return mine, run_plan.offsets


def load(model: Model, files: list[InputFile], run_plan: RunPlan | None = None, part: Part | None = None) -> list[str]:
    """Insert nsys exports: each run's files are attached read-only, given ranks, loaded and detached. An export
    in WAL mode is read from a temporary copy (SQLite would create -wal/-shm files beside it); that is said.
    With ``run_plan`` (``nsys_plan``), ``files`` are some exports of its run, given the run's ranks and offsets;
    with ``part``, only that part of the one export given (its processes, its window of steps)."""
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="traceql-") as scratch:
        for run, group in by_run(files).items():
            attached, kernels = [], {}
            try:
                for i, f in enumerate(group):
                    copy = None
                    if f.wal:
                        copy = Path(scratch) / f"{i}-{f.path.name}"
                        shutil.copyfile(f.path, copy)
                        notes.append(f"note: {f.path}: a SQLite database in WAL mode; read from a temporary copy, "
                                     "so that nothing is created beside it")
                    attached.append(attach(model.con, f.path, f"src{i}", read_from=copy, scratch=Path(scratch)))
                    kernels[attached[-1].alias], said = read_kernels(
                        model.con, attached[-1], parts.where(part, attached[-1]), part=part is not None,
                        launch_where=parts.launch_where(part))
                    notes += attached[-1].notes + said + [n for n in [name_rank_note(f.path)] if n]
                ranks, offset = _ranks(run_plan, attached, run, part)
                _load_run(model, attached, ranks, kernels, offset, part)
            finally:
                for done in attached:
                    detach(model.con, done.alias)
    return notes
