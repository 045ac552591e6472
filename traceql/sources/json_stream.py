"""Stream a Chrome-trace JSON object: top-level keys as values, ``traceEvents`` one event at a time.

Memory stays bounded by one event (plus a read chunk) whatever the file size. Non-integer numbers are kept
as their decimal text (``parse_float=str``) so that microsecond timestamps convert to nanoseconds exactly. A
UTF-8 byte order mark before the document is skipped.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from traceql.analyzers.units import MIB
from traceql.errors import InputError

CHUNK = MIB
BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark, which some editors and tools write first
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder(parse_float=str)
TRUNCATED = "truncated JSON: the file ends early (was the trace still being written?)"


class _Reader:
    def __init__(self, fh: IO[str], path: Path) -> None:
        self.fh, self.path = fh, path
        self.buf, self.pos, self.eof = "", 0, False

    def _fill(self) -> bool:
        if self.eof:
            return False
        data = self.fh.read(CHUNK)
        if not data:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + data
        self.pos = 0
        return True

    def _fail(self, what: str) -> InputError:
        return InputError(what, path=str(self.path))

    def peek(self) -> str:
        while True:
            self.pos = cast("re.Match[str]", _WS.match(self.buf, self.pos)).end()  # matches "" too: never None
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def expect(self, ch: str) -> None:
        got = self.peek()
        if got != ch:
            if got == "":
                raise self._fail(TRUNCATED)
            raise self._fail(f"invalid JSON: expected {ch!r}, found {got!r}")
        self.pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except RecursionError:
                raise self._fail("invalid trace: JSON nested too deeply to be a trace event") from None
            except json.JSONDecodeError as exc:
                if self._fill():
                    continue
                if self.eof and exc.pos >= len(self.buf) - 1:
                    raise self._fail(TRUNCATED) from None
                raise self._fail(f"invalid JSON ({exc.msg})") from None
            except ValueError:  # an integer longer than Python converts (4300 digits)
                raise self._fail("invalid trace: a number with thousands of digits, which no trace field holds") \
                    from None
            if end == len(self.buf) and not self.eof and self._fill():
                continue  # a number may go on in the next chunk
            self.pos = end
            return obj


def _open_text(path: Path) -> IO[str]:
    with path.open("rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    if gz:  # utf-8-sig: a byte order mark first is skipped
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace")
    return path.open("r", encoding="utf-8-sig", errors="replace")


def stream_trace(path: Path, meta: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Yield each element of ``traceEvents``; every other top-level key lands in ``meta``."""
    try:
        with _open_text(path) as fh:
            r = _Reader(fh, path)
            r.expect("{")
            if r.peek() == "}":
                return
            while True:
                key = r.value()
                r.expect(":")
                if key == "traceEvents":
                    r.expect("[")
                    if r.peek() == "]":
                        r.pos += 1
                    else:
                        while True:
                            yield r.value()
                            if r.peek() == ",":
                                r.pos += 1
                                continue
                            r.expect("]")
                            break
                    meta["_has_events"] = True
                else:
                    meta[key] = r.value()
                if r.peek() == ",":
                    r.pos += 1
                    continue
                r.expect("}")
                return
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"corrupt gzip ({exc}): the file was cut or damaged", path=str(path)) from None
