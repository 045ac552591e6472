"""Shared fixtures: the embedded traces, the real corpus in ../shared (skipped when absent), a CLI runner."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceql.cli import app

ROOT = Path(__file__).resolve().parent.parent
EMBEDDED = ROOT / "datasets" / "default"
# the embedded default: GPT-2 DDP on 2 × H200 (one nsys per rank) and its single-GPU isolated run
DDP_TRACE = EMBEDDED / "gpt2-nsys"
SINGLE_TRACE = EMBEDDED / "gpt2-single-nsys"
DDP_FILES = sorted((DDP_TRACE / "traces").glob("*.sqlite"))
DDP_FILE = DDP_FILES[0]  # rank 0's export
SINGLE_FILE = next((SINGLE_TRACE / "traces").glob("*.sqlite"))
RUNS = ROOT / "datasets" / "runs"
SHARED = ROOT.parent / "shared" / "datasets"
H200 = SHARED / "h200-ddp"
PUBLIC = SHARED / "public"


def shared_file(*parts: str) -> Path:
    """A file of the shared corpus; the calling test is skipped when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared dataset absent: {path}")
    return path


def shared_sqlite_files() -> list[Path]:
    return sorted(SHARED.rglob("*.sqlite")) if SHARED.exists() else []


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def invoke(runner: CliRunner):
    """Run the CLI in-process: ``invoke("info", path)`` → result with exit_code, stdout, stderr."""

    def _invoke(*args: object):
        return runner.invoke(app, [str(a) for a in args])

    return _invoke


@pytest.fixture
def ddp_copy(tmp_path: Path) -> Path:
    """A private copy of rank 0's embedded export, for tests that damage or alter it."""
    dst = tmp_path / "copy.sqlite"
    shutil.copyfile(DDP_FILE, dst)
    return dst
