"""Physical invariants of the loaded model, checked columnar once every source is in.

Rows that cannot be a GPU activity — no start or end, an end before the start — and exact duplicate rows
are dropped, each kind with one warning naming the file, the relation, how many rows and one example. A trace
with nothing usable left, or whose kernels all last 0 ns (no durations recorded), is refused.
"""

from __future__ import annotations

import duckdb

from traceql.errors import SchemaError

CHECKS = [("no start or end time", "start_ns IS NULL OR end_ns IS NULL"),
          ("an end before its start", "end_ns < start_ns")]
IDENTITY = "run_id, rank, device, stream, start_ns, end_ns, correlation_id"
WHAT = {"kernels": "coalesce(short_name, name, '?')", "memcpy": "coalesce(copy_kind, '?')"}


def _where(con: duckdb.DuckDBPyConnection, run_id: str | None) -> str:
    paths = [r[0] for r in con.execute("SELECT path FROM runs WHERE run_id IS NOT DISTINCT FROM ? ORDER BY path",
                                       [run_id]).fetchall()]
    return ", ".join(paths) if paths else str(run_id)


def _may_repeat(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether two rows share their place and time (which exact duplicates do): a cheap test before the
    full comparison of every column."""
    return bool(con.execute(f"""SELECT count(*) > count(DISTINCT ({IDENTITY})) FROM {table}""").fetchone()[0])


def _drop_invalid(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    notes = []
    for why, condition in CHECKS:
        bad = con.execute(f"""
            SELECT run_id, count(*) AS n, any_value({WHAT[table]}) AS example,
                   any_value(start_ns) AS s, any_value(end_ns) AS e
            FROM {table} WHERE {condition} GROUP BY run_id ORDER BY run_id""").fetchall()
        for run_id, n, example, s, e in bad:
            notes.append(f"warning: {_where(con, run_id)}: {table}: {n:,} rows dropped with {why} "
                         f"(e.g. {example}, start {s}, end {e})")
        if bad:
            con.execute(f"DELETE FROM {table} WHERE {condition}")
    dup = con.execute(f"SELECT count(*) - (SELECT count(*) FROM (SELECT DISTINCT * FROM {table})) FROM {table}"
                      ).fetchone()[0] if _may_repeat(con, table) else 0
    if dup:
        example = con.execute(f"""SELECT run_id, {WHAT[table]}, start_ns FROM {table}
                                  GROUP BY ALL HAVING count(*) > 1 LIMIT 1""").fetchone()
        notes.append(f"warning: {_where(con, example[0])}: {table}: {dup:,} exact duplicate rows dropped "
                     f"(e.g. {example[1]} at {example[2]})")
        con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT DISTINCT * FROM {table}")
    return notes


def check(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Drop what cannot be an activity (warnings returned); SchemaError when no usable kernel is left."""
    before = con.execute("SELECT count(*) FROM kernels").fetchone()[0]
    notes = [n for table in ("kernels", "memcpy") for n in _drop_invalid(con, table)]
    after, longest = con.execute("SELECT count(*), max(duration_ns) FROM kernels").fetchone()
    where = _where(con, con.execute("SELECT min(run_id) FROM runs").fetchone()[0])
    if before and not after:
        raise SchemaError(f"none of its {before:,} kernels has usable times ({notes[0].split(': ', 3)[-1]})",
                          path=where)
    if after and longest == 0:
        raise SchemaError(f"every one of its {after:,} kernels lasts 0 ns: the trace records no durations "
                          "(a Kineto trace without \"dur\"?)", path=where)
    return notes
