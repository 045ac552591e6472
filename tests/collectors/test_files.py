"""The one atomic write (``traceql.collectors.files``), which every output of traceql goes through: the whole
file or nothing, flushed to disk before the rename, the user's file mode, unique temp names, nothing left."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from traceql.collectors.files import TEMP_GLOB, atomic_path, write_json
from traceql.export.files import atomic_write


def test_the_file_appears_whole_and_synced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    target = tmp_path / "out.parquet"
    with atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".parquet" and not tmp.exists()
        tmp.write_bytes(b"x" * 1000)
        assert not target.exists()  # readers see nothing until it is complete
    assert target.read_bytes() == b"x" * 1000
    assert synced[0].startswith(str(tmp_path / ".out.")) and synced[-1] == str(tmp_path)  # file, then folder
    assert not list(tmp_path.glob(TEMP_GLOB))


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_two_writers_never_share_a_temp_name(tmp_path: Path) -> None:
    with atomic_path(tmp_path / "a.json") as one, atomic_path(tmp_path / "a.json") as two:
        assert one != two


def test_the_users_file_mode_for_both_ways_of_writing(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_json(tmp_path / "m.json", {"a": 1})
        atomic_write(tmp_path / "r.html", lambda fh: fh.write(b"<p>"))
    finally:
        os.umask(old)
    for name in ("m.json", "r.html"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640



def test_a_crash_report_in_a_rank_log_reads_as_one_line(tmp_path: Path) -> None:
    """A rank log ending as the one of a rank that aborted in torch.profiler's cycle end did (its last lines
    copied), followed by the report Python's fault handler writes: what ``collect`` says of it; nothing for a
    log without a report, or no log."""
    from traceql.collectors.manifest import crash_of

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0.log").write_text(
        "[rank 0] python -m traceql.collectors.driver --profiler torch\n"
        "USDT:2026-11-28 20:29:32 26360:26360 SyncActivityProfilerHandler.cpp:59] profiler_stop\n"
        "malloc(): unsorted double linked list corrupted\n"
        "Fatal Python error: Aborted\n\n"
        "Current thread 0x00007f5a (most recent call first):\n"
        '  File "/venv/lib/python3.11/site-packages/torch/profiler/profiler.py", line 890 in step\n'
        '  File "/work/collectors/window.py", line 160 in step\n')
    (logs / "rank1.log").write_text("RuntimeError: Connection reset by peer\n")
    assert crash_of(tmp_path, 0) == ("Aborted (malloc(): unsorted double linked list corrupted) in "
                                     "profiler.py:890 step")
    assert crash_of(tmp_path, 1) is None
    assert crash_of(tmp_path, 2) is None  # no log at all
