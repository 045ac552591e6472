"""Turn the paths a user typed into checked input files, before any of them is opened.

Every check here reads at most the first 100 bytes of a file, so a bad input is refused with one clear
line and is never opened by a database engine.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import replace
from pathlib import Path

from traceql.errors import InputError
from traceql.sources import registry, runfolder
from traceql.sources.files import InputFile

NOT_A_TRACE = "not a trace traceql can read (expected an nsys SQLite export or a torch.profiler JSON trace)"


def _embedded() -> Path:
    """The embedded example's folder: inside the installed package (``traceql/datasets``, as setup.py maps
    it), or beside the package in a source checkout (``datasets/``)."""
    package = Path(__file__).resolve().parents[1]
    inside = package / "datasets" / "default"
    return inside if inside.is_dir() else package.parent / "datasets" / "default"


EMBEDDED = _embedded()
DEFAULT_TRACE = EMBEDDED / "gpt2-nsys"
DEFAULT_BASELINE = EMBEDDED / "gpt2-single-nsys"


def _os_reason(exc: OSError) -> str:
    """What the OS said of a path, as the rest of an error line."""
    if exc.errno == errno.ELOOP:
        return "a symbolic link that loops back on itself (too many levels of symbolic links)"
    if exc.errno == errno.ENAMETOOLONG:
        return "file name too long for the file system (a path typed or pasted wrongly?)"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"cannot read: {exc.strerror} (check its permissions)"
    return f"cannot read: {exc.strerror or exc}"


def status(path: Path) -> os.stat_result | None:
    """``path``'s status, links followed; None when nothing is there (a link to nothing included);
    InputError naming the path when the OS cannot tell (a name too long, a link loop, no permission)."""
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise InputError(_os_reason(exc), path=str(path)) from None
    except ValueError:  # a NUL character: no file has that name
        raise InputError("a path with a NUL character: no file can have that name", path=str(path)) from None


def is_dir(path: Path) -> bool:
    """Whether ``path`` is a folder (links followed); InputError where the OS cannot tell."""
    st = status(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def is_file(path: Path) -> bool:
    """Whether ``path`` is a regular file (links followed); InputError where the OS cannot tell."""
    st = status(path)
    return st is not None and stat.S_ISREG(st.st_mode)


def _missing(path: Path) -> str:
    try:
        if path.is_symlink():
            return "a link to nothing"
        packed = [p.name for p in (path.with_name(path.name + ".xz"), path.with_name(path.name + ".gz"))
                  if p.is_file()]
    except (OSError, ValueError):
        return "no such file or directory"
    if packed:  # a run folder shipped with its exports compressed
        tool = "xz -dk" if packed[0].endswith(".xz") else "gunzip -k"
        return f"no such file, but {packed[0]} is beside it: unpack it first ({tool} {packed[0]})"
    return "no such file or directory"


def check_file(path: Path) -> InputFile:
    """Check that one file can be read, then ask the readers (``traceql.sources.registry``) whose it is, by its first
    bytes and its name; raise InputError for anything that is not a trace."""
    st = status(path)
    if st is None:
        raise InputError(_missing(path), path=str(path))
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block forever, a device never end
        raise InputError("not a regular file (a pipe, socket or device?): give the trace file itself",
                         path=str(path))
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(100)
    except OSError as exc:
        raise InputError(_os_reason(exc), path=str(path)) from exc
    if size == 0:
        raise InputError("empty file (0 bytes): the capture or export was probably interrupted", path=str(path))
    reader = registry.recognise(head, path)
    if reader is None:
        raise InputError(registry.refusal(head, path) or NOT_A_TRACE, path=str(path))
    checked = InputFile(path, reader.FORMAT)
    return reader.check(checked, head, size) if hasattr(reader, "check") else checked


def _is_trace_name(name: str) -> bool:
    return name.endswith((".sqlite", ".json", ".json.gz", ".csv")) and name not in {"manifest.json"}


def _run_folder(path: Path) -> list[InputFile] | None:
    """The traces of a `traceql collect` run folder, as one run; None for other folders."""
    manifest = runfolder.read_manifest(path)
    if manifest is None:
        return None
    cpu, run = manifest.get("device") == "cpu", runfolder.run_name(path, manifest)
    return [replace(check_file(p), cpu_run=cpu, run=run) for p in runfolder.trace_paths(path, manifest)]


def _is_file(path: Path) -> bool:
    """Whether a folder's entry is a regular file (links followed); an entry that cannot be told (a link
    loop) is not."""
    try:
        return path.is_file()
    except OSError:
        return False


def _folders_with_traces(entries: list[Path]) -> list[str]:
    """The names of the folders among ``entries`` that hold traces themselves (one level down)."""
    found = []
    for entry in entries:
        try:
            if entry.is_dir() and any(_is_trace_name(p.name) and _is_file(p) for p in entry.iterdir()):
                found.append(entry.name)
        except OSError:
            continue
    return found


def _scan_directory(path: Path) -> list[Path]:
    try:
        entries = sorted(path.iterdir())
    except OSError as exc:
        raise InputError(_os_reason(exc), path=str(path)) from exc
    found = [p for p in entries if _is_trace_name(p.name) and _is_file(p)]
    if not found:
        # reports a reader refuses by their name alone (the nsys reader's .nsys-rep, .qdrep): not read here
        reps = [p.name for p in entries if registry.refusal(b"", p) and _is_file(p)]
        export = "nsys export --type sqlite --include-blobs=true"
        hint = f" (it has {len(reps)} .nsys-rep report(s): export them with {export})" if reps else ""
        if not hint and (inner := _folders_with_traces(entries)):
            hint = f" (traces are in its folder(s) {', '.join(inner[:3])}{', …' if len(inner) > 3 else ''}: give those)"
        raise InputError(f"directory holds no traces (*.sqlite, *.json, *.json.gz, ncu *.csv){hint}", path=str(path))
    return found


def resolve(paths: list[str | Path] | None) -> list[InputFile]:
    """Expand directories, check every file; with no paths, the embedded default trace."""
    if not paths:
        if not is_dir(DEFAULT_TRACE):
            raise InputError(
                "embedded default trace is missing (an incomplete installation?): reinstall traceql, or pass FILE",
                path=str(DEFAULT_TRACE),
            )
        paths = [DEFAULT_TRACE]
    checked: list[InputFile] = []
    for raw in paths:
        p = Path(raw)
        folder = is_dir(p)
        run = _run_folder(p) if folder else None
        if run is not None:
            checked.extend(run)
        else:
            checked.extend(check_file(f) for f in (_scan_directory(p) if folder else [p]))
    seen: set[Path] = set()
    for f in checked:
        key = f.path.resolve()
        if key in seen:
            raise InputError("given twice", path=str(f.path))
        seen.add(key)
    return checked
