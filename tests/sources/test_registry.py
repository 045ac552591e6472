"""The readers' registry: each reader recognises its own files, a format is added by one module and one line
in ``registry.READERS``, and what no reader claims is refused with the same line, first reason first."""

from __future__ import annotations

import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import DDP_FILES, DDP_TRACE, ROOT, RUNS
from traceql.errors import InputError
from traceql.model import engine
from traceql.sources import inputs, registry
from traceql.sources.files import InputFile
from traceql.sources.runs import split_runs

NCU_FILES = sorted((ROOT / "datasets" / "ncu").glob("*.csv"))
KINETO_FILE = sorted((RUNS / "gpt2-straggler-torch" / "traces").glob("*.json.gz"))[0]
TOY_READER = '''"""A toy format: files that start with TOY."""

FORMAT = "toy"


def sniff(head, path):
    return head.startswith(b"TOY")


def loose_runs(loose):
    return [loose]


def load(model, files):
    return [f"read {len(files)} toy file(s)"]
'''


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder holding a new reader module (``toy_reader``), listed last in the registry."""
    (tmp_path / "toy_reader.py").write_text(TOY_READER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "READERS", [*registry.READERS, "toy_reader"])
    yield tmp_path
    sys.modules.pop("toy_reader", None)


@pytest.mark.parametrize(("path", "fmt"), [*((p, "nsys-sqlite") for p in sorted(DDP_TRACE.glob("traces/*.sqlite"))),
                                           (KINETO_FILE, "kineto-json"), *((p, "ncu-csv") for p in NCU_FILES)],
                         ids=lambda v: v.name if isinstance(v, Path) else v)
def test_each_reader_recognises_the_embedded_files(path: Path, fmt: str) -> None:
    assert inputs.check_file(path).fmt == fmt
    assert registry.recognise(path.read_bytes()[:100], path) is registry.reader(fmt)


def test_a_new_format_is_one_module_and_one_line(toy: Path) -> None:
    (toy / "a.toy").write_bytes(b"TOY 1\n")
    (toy / "b.toy").write_bytes(b"TOY 2\n")
    checked = inputs.check_file(toy / "a.toy")
    assert checked == InputFile(toy / "a.toy", "toy")
    model = engine.Model(engine.connect())
    assert registry.load(model, [checked, inputs.check_file(toy / "b.toy")]) == ["read 2 toy file(s)"]
    # its loose files form runs as it says, beside the built-in readers' runs
    assert split_runs([toy / "a.toy", DDP_FILES[0], toy / "b.toy"]) == [[toy / "a.toy", toy / "b.toy"], [DDP_FILES[0]]]


def test_a_format_not_listed_is_not_read(toy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (toy / "a.toy").write_bytes(b"TOY 1\n")
    monkeypatch.setattr(registry, "READERS", registry.READERS[:-1])
    with pytest.raises(InputError, match="not a trace traceql can read"):
        inputs.check_file(toy / "a.toy")


SQLITE_HEAD = DDP_FILES[0].read_bytes()[:100]
REPORT = b"NVIDIA Tegra Profiler Report 3.0\n" + b"\0" * 64
OLD_SQLITE = b"SQLite format 2\x00" + b"\0" * 90
NOT_A_TRACE = "not a trace traceql can read (expected an nsys SQLite export or a torch.profiler JSON trace)"


@pytest.mark.parametrize(("name", "data", "verdict"), [
    ("x.csv", SQLITE_HEAD, "ncu-csv"),  # the ncu reader claims every .csv, a database so named too
    ("x.csv", b' {"traceEvents": []}', "kineto-json"),  # ... but a JSON trace is Kineto's, whatever its name
    ("x.nsys-rep", b"{}", "kineto-json"),  # a reader's claim comes before any refusal
    ("x.nsys-rep", REPORT, "an Nsight Systems report, not its SQLite export; "
                           "export it first: nsys export --type sqlite --include-blobs=true -o x.sqlite x.nsys-rep"),
    ("x.qdrep", b"hello", "an Nsight Systems report, not its SQLite export; "
                          "export it first: nsys export --type sqlite --include-blobs=true -o x.sqlite x.qdrep"),
    ("x.bin", REPORT, "an Nsight Systems report, not its SQLite export; "
                      "export it first: nsys export --type sqlite --include-blobs=true -o x.sqlite x.bin"),
    ("x.nsys-rep", OLD_SQLITE, "an Nsight Systems report, not its SQLite export; export it first: "
                               "nsys export --type sqlite --include-blobs=true -o x.sqlite x.nsys-rep"),
    ("x.sqlite", OLD_SQLITE, "corrupt SQLite header"),
    ("x.sqlite", SQLITE_HEAD[:50], "truncated SQLite database (50 bytes, shorter than its header)"),
    ("x.sqlite", SQLITE_HEAD, f"truncated SQLite database (100 of {DDP_FILES[0].stat().st_size} bytes): "
                              "the copy or the export did not finish"),
    ("x.sqlite", b"hello\n", NOT_A_TRACE),
    ("x.NSYS-REP", b"hello\n", NOT_A_TRACE),
])
def test_claims_and_refusals_keep_their_order(tmp_path: Path, name: str, data: bytes, verdict: str) -> None:
    (tmp_path / name).write_bytes(data)
    if verdict in ("ncu-csv", "kineto-json"):
        assert inputs.check_file(tmp_path / name).fmt == verdict
    else:
        with pytest.raises(InputError) as refused:
            inputs.check_file(tmp_path / name)
        assert str(refused.value) == f"{tmp_path / name}: {verdict}"


def test_nsys_notes_an_export_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "wal.sqlite"
    shutil.copyfile(DDP_FILES[0], path)
    with sqlite3.connect(path) as con:
        con.execute("PRAGMA journal_mode=WAL")
    con.close()
    assert inputs.check_file(path) == InputFile(path, "nsys-sqlite", wal=True)
    assert not inputs.check_file(DDP_FILES[0]).wal
