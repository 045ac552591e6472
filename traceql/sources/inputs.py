"""Turn the paths a user typed into checked input files, before any of them is opened.

Every check here reads at most the first 100 bytes of a file, so a bad input is refused with one clear
line and is never opened by a database engine.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from pathlib import Path

from traceql.errors import InputError
from traceql.sources import runfolder

SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report"


def _embedded() -> Path:
    """The embedded example's folder: inside the installed package (``traceql/datasets``, as setup.py maps
    it), or beside the package in a source checkout (``datasets/``)."""
    package = Path(__file__).resolve().parents[1]
    inside = package / "datasets" / "default"
    return inside if inside.is_dir() else package.parent / "datasets" / "default"


EMBEDDED = _embedded()
DEFAULT_TRACE = EMBEDDED / "gpt2-nsys"
DEFAULT_BASELINE = EMBEDDED / "gpt2-single-nsys"


@dataclass(frozen=True)
class InputFile:
    """One checked input: its path and its format (``nsys-sqlite``, ``kineto-json`` or ``ncu-csv``)."""

    path: Path
    fmt: str
    cpu_run: bool = False  # from a collection on CPU: a Kineto trace without GPU activity is expected
    run: str | None = None  # the run folder it came from: its files form one run of that name
    wal: bool = False  # a SQLite database in WAL mode: reading it in place would create files beside it


def _export_hint(path: Path) -> str:
    return f"export it first: nsys export --type sqlite -o {path.with_suffix('.sqlite').name} {path.name}"


def _check_sqlite_header(path: Path, head: bytes, size: int) -> None:
    """Refuse a SQLite file whose header promises more pages than the file holds."""
    if len(head) < 100:
        raise InputError(f"truncated SQLite database ({size} bytes, shorter than its header)", path=str(path))
    (page_size,) = struct.unpack(">H", head[16:18])
    page_size = 65536 if page_size == 1 else page_size
    change_counter, page_count = struct.unpack(">II", head[24:32])
    (valid_for,) = struct.unpack(">I", head[92:96])
    if valid_for == change_counter and page_count:
        expected = page_size * page_count
        if size < expected:
            raise InputError(
                f"truncated SQLite database ({size} of {expected} bytes): "
                "the copy or the export did not finish",
                path=str(path),
            )


def check_file(path: Path) -> InputFile:
    """Classify one file by its first bytes; raise InputError for anything that is not a trace."""
    if not path.exists():
        why = "a link to nothing" if path.is_symlink() else "no such file or directory"
        raise InputError(why, path=str(path))
    if not path.is_file():  # a FIFO would block forever, a device never end
        raise InputError("not a regular file (a pipe, socket or device?): give the trace file itself",
                         path=str(path))
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from exc
    if size == 0:
        raise InputError("empty file (0 bytes): the capture or export was probably interrupted", path=str(path))
    if head.startswith(b"\x1f\x8b") or head.lstrip()[:1] == b"{":
        return InputFile(path, "kineto-json")
    if path.suffix.lower() == ".csv":
        return InputFile(path, "ncu-csv")
    if head.startswith(SQLITE_MAGIC):
        _check_sqlite_header(path, head, size)
        return InputFile(path, "nsys-sqlite", wal=head[18:20] == b"\x02\x02")
    if head.startswith(NSYS_REP_MAGIC) or path.suffix in {".nsys-rep", ".qdrep"}:
        raise InputError(f"an Nsight Systems report, not its SQLite export; {_export_hint(path)}", path=str(path))
    if head.startswith(b"SQLite format"):
        raise InputError("corrupt SQLite header", path=str(path))
    raise InputError(
        "not a trace traceql can read (expected an nsys SQLite export or a torch.profiler JSON trace)",
        path=str(path),
    )


def _is_trace_name(name: str) -> bool:
    return name.endswith((".sqlite", ".json", ".json.gz", ".csv")) and name not in {"manifest.json"}


def _run_folder(path: Path) -> list[InputFile] | None:
    """The traces of a `traceql collect` run folder, as one run; None for other folders."""
    manifest = runfolder.read_manifest(path)
    if manifest is None:
        return None
    cpu, run = manifest.get("device") == "cpu", runfolder.run_name(path, manifest)
    return [replace(check_file(p), cpu_run=cpu, run=run) for p in runfolder.trace_paths(path, manifest)]


def _scan_directory(path: Path) -> list[Path]:
    found = sorted(p for p in path.iterdir() if p.is_file() and _is_trace_name(p.name))
    if not found:
        reps = sorted(p.name for p in path.iterdir() if p.suffix in {".nsys-rep", ".qdrep"})
        hint = f" (it has {len(reps)} .nsys-rep report(s): export them with nsys export --type sqlite)" if reps else ""
        raise InputError(f"directory holds no traces (*.sqlite, *.json, *.json.gz, ncu *.csv){hint}", path=str(path))
    return found


def resolve(paths: list[str | Path] | None) -> list[InputFile]:
    """Expand directories, check every file; with no paths, the embedded default trace."""
    if not paths:
        if not DEFAULT_TRACE.exists():
            raise InputError(
                "embedded default trace is missing (an incomplete installation?): reinstall traceql, or pass FILE",
                path=str(DEFAULT_TRACE),
            )
        paths = [DEFAULT_TRACE]
    checked: list[InputFile] = []
    for raw in paths:
        p = Path(raw)
        run = _run_folder(p) if p.is_dir() else None
        if run is not None:
            checked.extend(run)
        else:
            checked.extend(check_file(f) for f in (_scan_directory(p) if p.is_dir() else [p]))
    seen: set[Path] = set()
    for f in checked:
        key = f.path.resolve()
        if key in seen:
            raise InputError("given twice", path=str(f.path))
        seen.add(key)
    return checked
