"""How a rank's nsys report is exported: with NCCL's NVTX payloads where the nsys at hand can, without them where
it is older. nsys does not run on this machine: a stand-in script answers as nsys 2024.2+ and an older one do
(an unknown option is an error that names it)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from traceql.collectors.profilers import ProfilerOptions, postprocess

NSYS = """#!/bin/sh
echo "$@" >> "{log}"
for a in "$@"; do
  case "$a" in --include-blobs=true) [ "{old}" = yes ] && {{ echo "unrecognised option '$a'" >&2; exit 1; }};; esac
done
while [ $# -gt 0 ]; do [ "$1" = -o ] && {{ shift; echo exported > "$1"; }}; shift; done
"""


def stand_in(tmp: Path, *, old: bool) -> tuple[Path, Path]:
    log, binary = tmp / "calls.txt", tmp / "nsys"
    binary.write_text(NSYS.format(log=log, old="yes" if old else "no"))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return binary, log


@pytest.mark.parametrize("old", [False, True], ids=["nsys-with-blobs", "older-nsys"])
def test_reports_export_with_nvtx_payloads_where_nsys_can(tmp_path: Path, old: bool) -> None:
    binary, log = stand_in(tmp_path, old=old)
    base = tmp_path / "run_rank0"
    base.with_name("run_rank0.nsys-rep").write_text("report")
    files = postprocess(ProfilerOptions(name="nsys"), binary, base)
    assert files[0] == tmp_path / "run_rank0.sqlite" and files[0].read_text() == "exported\n"
    calls = log.read_text().splitlines()
    assert "--include-blobs=true" in calls[0]
    assert len(calls) == (2 if old else 1)
    if old:
        assert "--include-blobs" not in calls[1] and "--type sqlite" in calls[1]
