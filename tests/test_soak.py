"""The soak (``bench/soak.py``) in its short form: every reading command, in JSON, over the embedded example,
the in-run run, a 4-rank straggler run and a Kineto run, each in a fresh process while two others keep the CPU
busy. A death by a signal (a crash in DuckDB, polars or their threads), an exit 70, a traceback or a JSON
output cut short fails it, with the command and every thread's stack."""

from __future__ import annotations

import subprocess
import sys

from tests.paths import ROOT


def test_no_reading_command_dies_under_load() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "soak.py"), "--set", "quick", "-n", "1"],
                          capture_output=True, text=True, check=False, timeout=1800)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "0 of 28 runs failed" in done.stdout
    for command in ("info", "detect", "ranks", "collectives", "whatif", "query", "diff"):
        assert f"\n{command}" in done.stdout  # each ran, its exits counted
