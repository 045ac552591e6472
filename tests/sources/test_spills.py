"""DuckDB's spills (a sort larger than its memory) from several instances at once: each instance of ours spills
into a folder of its own, so that processes reading at the same moment (a busy machine, `--workers`) never read
or remove each other's spill files, and the folder is gone once the connection closes."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from tests.paths import ROOT
from traceql.model import engine

# a sort of 3 M rows under a 40 MB memory limit spills; its sum depends on the order, so a block read back from
# another instance's spill file changes it (or fails the read)
SPILLING = """
import sys
from traceql.model import engine
con = engine.connect()
con.execute("SET memory_limit = '40MB'")
con.execute("SET threads = 1")
print(con.execute(f'''SELECT sum(i * (r % 1000)) FROM (SELECT i, row_number() OVER (ORDER BY h) AS r FROM
    (SELECT i, hash(i + {sys.argv[1]}) AS h, repeat('x', 40) AS pad FROM range(3000000) t(i)))''').fetchone()[0])
"""


def _spilled(seed: int) -> int:
    """The same sort in plain SQL with no memory limit: no spill at all."""
    con = engine.connect()
    try:
        return int(con.execute(f"""SELECT sum(i * (r % 1000)) FROM (SELECT i, row_number() OVER (ORDER BY h) AS r
                                   FROM (SELECT i, hash(i + {seed}) AS h FROM range(3000000) t(i)))""").fetchone()[0])
    finally:
        con.close()


def test_three_processes_spilling_at_once_each_get_their_own_answer() -> None:
    procs = [subprocess.Popen([sys.executable, "-c", SPILLING, str(seed)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for seed in (1, 2, 3)]
    outs = [p.communicate(timeout=600) for p in procs]
    for seed, (proc, (out, err)) in zip((1, 2, 3), zip(procs, outs, strict=True), strict=True):
        assert proc.returncode == 0, err[-1000:]
        assert int(out) == _spilled(seed)


def test_each_connection_spills_into_its_own_folder_and_leaves_none() -> None:
    before = set(Path(tempfile.gettempdir()).glob("traceql-duckdb-*"))
    cons = [engine.connect() for _ in range(3)]
    folders = {c.execute("SELECT current_setting('temp_directory')").fetchone()[0] for c in cons}
    assert len(folders) == 3  # three instances, three folders
    for con in cons:
        con.execute("SET memory_limit = '40MB'")
        con.execute("SELECT i FROM range(3000000) t(i) ORDER BY hash(i)").fetchall()  # spills
    assert any(Path(f).is_dir() for f in folders)
    for con in cons:
        con.close()
    assert set(Path(tempfile.gettempdir()).glob("traceql-duckdb-*")) == before
