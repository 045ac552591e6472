"""The one check every output path goes through, before anything is read: a file output is a regular file or a
new name in a folder that exists, never a link, a device or a folder, never one of the inputs and never inside
a folder being read; a folder output (a dataset, a profile folder, a run) is a folder or a new name, never a
file and never inside an input.

    check_file_output(out, "--out", inputs=[trace, baseline])
    check_folder_output(root, "DATASET", inputs=sources)

Each refusal is one :class:`OptionError` (exit 2) naming the option and the path.
"""

from __future__ import annotations

import functools
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar, cast

from traceql.errors import OptionError
from traceql.sources import runfolder

Paths = Iterable[str | Path] | str | Path | None
F = TypeVar("F", bound=Callable[..., Path])


def _listed(paths: Paths) -> list[Path]:
    if paths is None:
        return []
    return [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]


def input_folders(path: str | Path) -> list[Path]:
    """What an input owns on disk, resolved: a folder itself; a file, and the run folder it lies in (if any)."""
    path = Path(path).resolve()
    if path.is_dir():
        return [path]
    return [path, *(p for p in path.parents[:2] if runfolder.read_manifest(p) is not None)]


def _inside_an_input(target: Path, inputs: Sequence[Path]) -> str | None:
    """What ``target`` lies inside (an input folder, or the run folder of an input file), in words; None when
    it is outside them all."""
    for given in inputs:
        for owned in input_folders(given):
            if owned in target.parents:
                return f"the input {given}" if owned == given.resolve() else f"the run folder {owned} of {given}"
    return None


def _refuse(option: str, path: str | Path, why: str) -> OptionError:
    return OptionError(f"{option} {path}: {why}")


def _os_errors(check: F) -> F:
    """A check whose every OSError (a name too long on the way, a folder it may not search) is one refusal."""

    @functools.wraps(check)
    def run(path: str | Path, option: str, inputs: Paths = None) -> Path:
        try:
            return check(path, option, inputs)
        except OSError as exc:
            raise _refuse(option, path, f"cannot use it as an output ({exc.strerror or exc})") from None

    return cast(F, run)  # functools.wraps keeps the check's signature


@_os_errors
def check_file_output(path: str | Path, option: str, inputs: Paths = None) -> Path:
    """``path``, when traceql may write a file there (replacing a regular file it names, if any)."""
    path = Path(path)
    if len(path.name.encode()) > 255 - 24:  # the temp name beside it adds up to 24 bytes
        raise _refuse(option, path, "the file name is too long for this file system")
    try:
        if stat.S_ISLNK(path.lstat().st_mode):
            raise _refuse(option, path, "is a symbolic link; traceql replaces an output whole and never writes "
                          "through a link: give the file's own path")
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise _refuse(option, path, "is a directory; give a file name for the output")
    if mode is not None and not stat.S_ISREG(mode):
        raise _refuse(option, path, "is not a regular file (a device, pipe or socket); give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise _refuse(option, path, f"its folder {parent} does not exist (traceql creates no folder for a file)")
    _check_outside(path, option, inputs)
    return path


@_os_errors
def check_folder_output(path: str | Path, option: str, inputs: Paths = None) -> Path:
    """``path``, when traceql may write a folder there (an existing folder, or a new name)."""
    path = Path(path)
    if len(path.name.encode()) > 255:
        raise _refuse(option, path, "the folder name is too long for this file system")
    if path.exists() and not path.is_dir():
        raise _refuse(option, path, "is a file, not a folder; give a folder (it is created when missing)")
    if not path.exists() and path.is_symlink():
        raise _refuse(option, path, "is a link to nothing; give a folder (it is created when missing)")
    _check_outside(path, option, inputs)
    return path


def _check_outside(path: Path, option: str, inputs: Paths) -> None:
    given = _listed(inputs)
    try:
        target = path.resolve()
    except (OSError, RuntimeError) as exc:  # a loop of links on the way
        raise _refuse(option, path, f"cannot resolve it ({exc})") from None
    if any(p.resolve() == target for p in given if p.exists() and not p.is_dir()):
        raise _refuse(option, path, "that is an input trace; traceql never writes its inputs")
    if any(p.resolve() == target for p in given if p.is_dir()):
        raise _refuse(option, path, "is one of the input folders; traceql never writes into its inputs: choose a "
                      "folder outside them")
    inside = _inside_an_input(target, given)
    if inside is not None:
        raise _refuse(option, path, f"lies inside {inside}; traceql never writes into its inputs: choose a "
                      "place outside them")
