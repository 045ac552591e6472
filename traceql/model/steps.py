"""Training steps: which step launched each kernel and memory operation, and the ``steps`` relation.

A step is an annotation range on the CPU: NVTX ``step_<i>`` (``step_<i>_nosync`` for an *isolated* step, run
with communication off) or, in a Kineto trace without those, ``ProfilerStep#<i>``. A kernel belongs to the
step whose range holds the start of the CUDA API call that launched it (``launch_ns``, found through the
correlation id), on any thread of the same process (rank): GPU work of step i often runs while the CPU is
already in step i+1, so GPU time never decides. Kernels launched outside every step have no step.
"""

from __future__ import annotations

import duckdb

NAMED = r"^step_([0-9]+)(_nosync)?$"
PROFILER_STEP = r"^ProfilerStep#([0-9]+)$"
GPU_SIDE = "gpu_user_annotation"  # Kineto's copy of an annotation on the GPU timeline: not a CPU range

MARKS = f"""
    WITH m AS (
        SELECT run_id, rank, start_ns, end_ns,
               regexp_extract(text, '{NAMED}', 1) AS named, regexp_extract(text, '{NAMED}', 2) AS nosync,
               regexp_extract(text, '{PROFILER_STEP}', 1) AS profiler
        FROM nvtx
        WHERE end_ns > start_ns AND coalesce(domain, '') <> '{GPU_SIDE}'
          AND (regexp_matches(text, '{NAMED}') OR regexp_matches(text, '{PROFILER_STEP}'))
    ), ranked AS (  -- a rank with step_<i> ranges uses those, else its ProfilerStep#<i> ranges
        SELECT *, bool_or(named <> '') OVER (PARTITION BY run_id, rank) AS has_named FROM m
    )
    SELECT run_id, rank, CAST(CASE WHEN has_named THEN named ELSE profiler END AS INTEGER) AS step,
           CASE WHEN nosync <> '' THEN 'isolated' ELSE 'sync' END AS step_kind,
           min(start_ns) AS cpu_start_ns, max(end_ns) AS cpu_end_ns
    FROM ranked WHERE (named <> '') = has_named
    GROUP BY ALL
"""


def _attribute(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """Fill ``step``/``step_kind`` of ``table``: the latest step starting at or before the launch, when its
    range still holds the launch. Only the rows that get a step are updated, in place."""
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE _stepped AS
        SELECT t.rowid AS row_id, s.step, s.step_kind
        FROM (SELECT rowid, run_id, rank, launch_ns FROM {table}) t ASOF LEFT JOIN _marks s
          ON t.run_id = s.run_id AND t.rank = s.rank AND t.launch_ns >= s.cpu_start_ns
        WHERE t.launch_ns <= s.cpu_end_ns
    """)
    con.execute(f"""UPDATE {table} SET step = s.step, step_kind = s.step_kind FROM _stepped s
                    WHERE {table}.rowid = s.row_id""")
    con.execute("DROP TABLE _stepped")


def attribute(con: duckdb.DuckDBPyConnection) -> None:
    """Give every kernel and memory operation its step, and fill the ``steps`` relation."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE _marks AS {MARKS}")
    if not con.execute("SELECT count(*) FROM _marks").fetchone()[0]:
        return
    for table in ("kernels", "memcpy"):
        _attribute(con, table)
    con.execute("""
        INSERT INTO steps
        SELECT m.run_id, m.rank, m.step, m.step_kind, m.cpu_start_ns, m.cpu_end_ns, g.gpu_start_ns, g.gpu_end_ns
        FROM _marks m LEFT JOIN (
            SELECT run_id, rank, step, step_kind, min(start_ns) AS gpu_start_ns, max(end_ns) AS gpu_end_ns
            FROM (SELECT run_id, rank, step, step_kind, start_ns, end_ns FROM kernels
                  UNION ALL SELECT run_id, rank, step, step_kind, start_ns, end_ns FROM memcpy)
            WHERE step IS NOT NULL GROUP BY ALL
        ) g USING (run_id, rank, step, step_kind)
    """)
    con.execute("DROP TABLE _marks")
