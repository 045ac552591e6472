"""A JSON file a user wrote or edited (a profile, a sweep, a cluster, a dataset's dataset.json), read whole
with one :class:`InputError` naming it for anything that keeps it from being JSON."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from traceql.errors import InputError

MAX_BYTES = 256 << 20  # far past any file of this kind: a larger one is some other file


def load_json(path: str | Path) -> Any:
    """The JSON value of a file; one :class:`InputError` naming it when it is missing, a link to nothing or in a
    loop, a folder, a device or pipe, unreadable, empty, too large, not UTF-8 text or not JSON. ``NaN`` and ``Infinity``
    parse (as Python's json reads them): the profile check refuses them where a number is wanted."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise InputError("is a folder, not a JSON file", path=str(path))
        if not stat.S_ISREG(mode):
            raise InputError("not a regular file (a device, pipe or socket), not a JSON file", path=str(path))
        if path.stat().st_size > MAX_BYTES:
            raise InputError(f"{path.stat().st_size:,} bytes: far too large for this JSON file (a file of another "
                             "kind?)", path=str(path))
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        why = "a link to nothing" if path.is_symlink() else "no such file"
        raise InputError(why, path=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("not a text file (expected JSON)", path=str(path)) from None
    except OSError as err:
        raise InputError(f"cannot read it ({err.strerror or err})", path=str(path)) from None
    if not text.strip():
        raise InputError("empty file (expected JSON)", path=str(path))
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"invalid JSON ({err.msg} at line {err.lineno})", path=str(path)) from None
    except RecursionError:
        raise InputError("not JSON traceql reads (nested too deeply)", path=str(path)) from None
    except ValueError as err:  # an integer of more digits than Python converts
        raise InputError(f"not JSON traceql reads ({err})", path=str(path)) from None
