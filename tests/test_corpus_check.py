"""``.ci/run`` fails under ``CI=true`` when the shared corpus is missing, instead of passing with its tests
skipped."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.paths import ROOT


def _check(tmp_path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "TRACEQL_SHARED")}
    return subprocess.run([sys.executable, "-m", "tests.corpus_check"], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


def test_ci_without_the_corpus_fails_with_one_line(tmp_path) -> None:
    missing = tmp_path / "nowhere"
    result = _check(tmp_path, CI="true", TRACEQL_SHARED=str(missing))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and f"corpus is missing ({missing / 'datasets'})" in result.stderr


def test_outside_ci_a_missing_corpus_only_skips(tmp_path) -> None:
    assert _check(tmp_path, TRACEQL_SHARED=str(tmp_path / "nowhere")).returncode == 0


def test_ci_with_the_corpus_goes_on(tmp_path) -> None:
    (tmp_path / "datasets").mkdir()
    result = _check(tmp_path, CI="true", TRACEQL_SHARED=str(tmp_path))
    assert result.returncode == 0 and result.stderr == ""
