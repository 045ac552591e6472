"""Fixtures every test folder shares: the CLI run in-process, a private copy of an embedded export, and the
``corpus`` marker (tests that need ../shared/datasets are skipped when it is absent)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.paths import DDP_FILE, HAVE_CORPUS, SHARED


def pytest_configure(config: pytest.Config) -> None:
    """Tests send Ctrl-C to the commands they start. A shell starts a background job with SIGINT ignored, and
    children inherit that: run that way, every child would ignore the Ctrl-C. Children get it back here.
    The exports' columnar copies go to a folder of the session's (every command and child shares it), never
    to the user's cache; results are not kept but where a test keeps them."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ["TRACEQL_CACHE_DIR"] = tempfile.mkdtemp(prefix="traceql-test-cache-")
    os.environ["TRACEQL_NO_RESULT_CACHE"] = "1"  # every test computes what it checks (tests/test_result_cache.py)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.pop("TRACEQL_CACHE_DIR", ""), ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAVE_CORPUS:
        return
    skip = pytest.mark.skip(reason=f"shared corpus absent: {SHARED}")
    for item in items:
        if item.get_closest_marker("corpus"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fresh_console(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with the console at its natural width and the global options at their defaults, and
    leaves them so (no test depends on what an earlier one ran)."""
    from traceql.cli import common

    monkeypatch.delenv("COLUMNS", raising=False)
    common.configure()
    yield
    common.configure()


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def invoke(runner: CliRunner):
    """Run the CLI in-process: ``invoke("info", path)`` → result with exit_code, stdout, stderr. An exception
    the command line does not turn into an error line fails the test with its traceback (CliRunner would
    otherwise keep it in ``result.exception`` behind a bare exit code 1)."""
    from traceql.cli import app

    def _invoke(*args: object):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    return _invoke


@pytest.fixture(scope="module")
def dask_scheduler() -> Iterator[str]:
    """The address of a Dask LocalCluster of 4 worker processes of 2 threads each (two tasks at once in each),
    shared by the tests of one module."""
    from traceql.parallel import quiet

    quiet()
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=4, threads_per_worker=2, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(4)
        yield cluster.scheduler_address


@pytest.fixture
def ddp_copy(tmp_path: Path) -> Path:
    """A private copy of rank 0's embedded export, for tests that damage or alter it."""
    dst = tmp_path / "copy.sqlite"
    shutil.copyfile(DDP_FILE, dst)
    return dst
