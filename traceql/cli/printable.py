"""Text safe on a terminal: nothing a trace or a path carries reaches it as a control character."""

from __future__ import annotations

import re

# characters a terminal would act on rather than show: C0 but tab and newline, DEL, C1, bidirectional overrides
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
CONTROL_OR_NEWLINE = re.compile(f"{CONTROL.pattern[:-1]}\n\t]")


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with every character a terminal would act on (an escape sequence setting the title or
    clearing the screen, a bell, a carriage return) shown as its Python escape (``\\x1b``); ``one_line``:
    newlines and tabs too (an error is one line, whatever path it names)."""
    return (CONTROL_OR_NEWLINE if one_line else CONTROL).sub(lambda m: repr(m.group())[1:-1], text)


def printable_json(text: str) -> str:
    """JSON text with the characters :func:`printable` shows escaped as JSON escapes (``\\u001b``): the same
    document, safe on a terminal."""
    return CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
