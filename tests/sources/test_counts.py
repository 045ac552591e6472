"""`traceql info --format json` agrees with counts taken directly with sqlite3, on every real export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.oracle import rows
from tests.paths import DDP_FILES, SINGLE_FILE, corpus, shared_sqlite_files


def direct_counts(path: Path) -> dict:
    by_device = rows(path, "SELECT deviceId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY deviceId")
    nccl = rows(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                      "WHERE s.value LIKE 'nccl%'")[0][0]
    return {"total": rows(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0],
            "by_device": {str(k): v for k, v in by_device}, "nccl": nccl}


FILES = [*DDP_FILES, SINGLE_FILE, *(corpus(f, id=f.name) for f in shared_sqlite_files())]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_info_counts_match_sqlite3(invoke, path: Path) -> None:
    result = invoke("info", path, "--format", "json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    expected = direct_counts(path)
    assert info["kernels"]["total"] == expected["total"]
    assert info["kernels"]["by_device"] == expected["by_device"]
    assert info["kernels"]["by_kind"].get("comm", 0) == expected["nccl"]
    assert sum(info["kernels"]["by_kind"].values()) == expected["total"]
    (run,) = info["runs"]
    assert run["path"] == str(path)
    assert run["schema_version"] and run["tool_version"]


@pytest.mark.corpus
def test_every_schema_version_is_read() -> None:
    """The corpus spans the nsys schemas the model must read; each one was loaded above."""
    files = shared_sqlite_files()
    versions = set()
    for f in files:
        names = {r[0] for r in rows(f, "SELECT name FROM sqlite_master WHERE type = 'table'")}
        meta = "META_DATA_EXPORT" if "META_DATA_EXPORT" in names else "EXPORT_META_DATA"
        versions.add(rows(f, f"SELECT value FROM {meta} WHERE name = 'EXPORT_SCHEMA_VERSION'")[0][0])
    assert {"2.9.1", "3.13.2", "3.16.1", "3.20.3", "3.24.14", "3.25.0"} <= versions
