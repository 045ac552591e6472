"""Kineto traces parsed in helper processes give what this process gives parsing them itself: the same model,
the same labels, the same error; a helper that dies leaves its traces to this process, and none outlives its
read."""

from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path

import pytest

import traceql
from tests.paths import RUNS
from traceql.commands.detect import detect
from traceql.errors import InputError
from traceql.sources import kineto_helpers
from traceql.sources.kineto_helpers import HELPER_BYTES_ENV, Helpers

TORCH_RUN = RUNS / "gpt2-torch"
TRACES = sorted((TORCH_RUN / "traces").glob("*.json.gz"))
NEVER = str(2**62)  # no trace is that large: no helper


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[Path]]:
    """The traces each helper started is given."""
    given: list[list[Path]] = []
    real = kineto_helpers._Helper.__init__

    def init(self: kineto_helpers._Helper, jobs: list[tuple[Path, bool]]) -> None:
        given.append([p for p, _ in jobs])
        real(self, jobs)

    monkeypatch.setattr(kineto_helpers._Helper, "__init__", init)
    return given


def _model(monkeypatch: pytest.MonkeyPatch, helper_bytes: str, paths: list[Path]) -> dict:
    monkeypatch.setenv(HELPER_BYTES_ENV, helper_bytes)
    with traceql.read_trace(paths) as trace:
        return {name: trace.relation(name) for name in ("kernels", "memcpy", "nvtx", "ranks", "steps")}


def test_a_run_read_with_helpers_is_the_run_read_here(monkeypatch: pytest.MonkeyPatch, started: list) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # one helper, whatever this machine's cores
    here = _model(monkeypatch, NEVER, [TORCH_RUN])
    assert not started
    helped = _model(monkeypatch, "0", [TORCH_RUN])
    assert [[p.name for p in s] for s in started] == [[TRACES[1].name]]
    assert here["kernels"].height > 1000
    for name, frame in here.items():
        assert helped[name].equals(frame), name


def test_a_run_labelled_rank_by_rank_with_read_ahead_is_the_same(monkeypatch: pytest.MonkeyPatch,
                                                                   started: list) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv(HELPER_BYTES_ENV, NEVER)
    here = detect(TORCH_RUN)
    assert not started
    monkeypatch.setenv(HELPER_BYTES_ENV, "0")
    helped = detect(TORCH_RUN)
    assert [[p.name for p in s] for s in started] == [[TRACES[1].name]]
    assert here.kernels.equals(helped.kernels)
    assert here.to_dict() == helped.to_dict()


def test_the_work_is_shared_every_other_trace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """On two cores, this process parses the first, third ... trace, one helper the second, fourth ...; each
    helper's process is gone once closed."""
    monkeypatch.setenv(HELPER_BYTES_ENV, "0")
    paths = []
    for i in range(4):
        paths.append(tmp_path / f"rank{i}.json.gz")
        shutil.copy(TRACES[i % 2], paths[-1])
    with Helpers([(p, False) for p in paths], helpers=1) as helpers:
        (helper,) = helpers._helpers  # noqa: SLF001
        assert helper.waiting == [paths[1], paths[3]]
        parsed = [helpers.parse(p) for p in paths]
    assert helper.proc.poll() is not None
    assert [p.path for p in parsed] == paths
    assert parsed[1].gpu.equals(parsed[3].gpu) and parsed[0].gpu.equals(parsed[2].gpu)


def test_a_trace_a_helper_cannot_read_gives_the_error_read_here(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    bad = tmp_path / "rank1.json.gz"
    bad.write_bytes(gzip.compress(gzip.decompress(TRACES[1].read_bytes())[: 50_000]))  # cut short
    errors = []
    for helper_bytes in (NEVER, "0"):
        monkeypatch.setenv(HELPER_BYTES_ENV, helper_bytes)
        with Helpers([(TRACES[0], False), (bad, False)], helpers=1) as helpers:
            helpers.parse(TRACES[0])
            with pytest.raises(InputError) as err:
                helpers.parse(bad)
        errors.append(str(err.value))
    assert errors[0] == errors[1] and str(bad) in errors[0]


def test_a_helper_that_dies_leaves_its_traces_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HELPER_BYTES_ENV, "0")
    monkeypatch.setattr(kineto_helpers.sys, "executable", shutil.which("false") or "/bin/false")
    with Helpers([(p, False) for p in TRACES], helpers=1) as helpers:
        parsed = [helpers.parse(p) for p in TRACES]
    monkeypatch.setattr(kineto_helpers.sys, "executable", sys.executable)
    with Helpers([(p, False) for p in TRACES], helpers=0) as helpers:
        assert not helpers._helpers  # noqa: SLF001
        here = [helpers.parse(p) for p in TRACES]
    assert all(a.gpu.equals(b.gpu) for a, b in zip(parsed, here, strict=True))


def test_small_traces_are_read_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below ``$TRACEQL_HELPER_BYTES`` (32 MiB by default) a helper's start would cost more than it saves."""
    monkeypatch.delenv(HELPER_BYTES_ENV, raising=False)
    assert all(p.stat().st_size < kineto_helpers.HELPER_BYTES for p in TRACES)
    with Helpers([(p, False) for p in TRACES], helpers=1) as helpers:
        assert not helpers._helpers  # noqa: SLF001
