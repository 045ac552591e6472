"""Tables that fit the terminal without hiding anything: names fold at their natural separators, and a table
whose numbers cannot all stand side by side is shown in parts, its key columns repeated.

    out = FitTable("Steps of gpt2 (ms)", ("step", "rank", "cpu", "gpu", ...), keys=2)
    out.add_row("1", "0", "81.62", ...)
    console.print(out)          # one table where it fits; else two or more, each "step rank ..." again

Numbers never wrap nor are cut (``…``): a column of numbers is as wide as its widest value. A name (a kernel,
a path, a run) is folded onto more lines after ``_ : > , / . ) ] -`` and spaces or before ``[ ( <``, and only
where a part alone is wider than its column, within it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from traceql.cli.printable import printable

# A rule of ASCII dashes under the header and nothing else: two spaces between columns, one byte a
# character (output read by other programs, or by tools that count bytes, stays within the width).
PLAIN = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)
# a name may break after these (after "." and "," only where no digit follows: never inside 1,234.5; after a
# closing bracket only where no punctuation follows), or before an opening bracket
BREAK = re.compile(r"(?<=[_:>/\- ])|(?<=[,.])(?!\d)|(?<=[)\]])(?![:;,.])|(?=[\[(<])")
MIN_NAME = 12  # a name column is never narrower than this (else the table goes in parts)
GAP = 2  # cells between two columns: the cell's padding and the rule's divider


def plain_table(title: str | None) -> Table:
    """An empty table in the command line's one style (a dashed rule under the header, nothing else)."""
    return Table(title=title, title_justify="left", title_style="bold", box=PLAIN, pad_edge=False,
                 padding=(0, 1, 0, 0), show_edge=False)


def fold_name(text: str, width: int) -> str:
    """``text`` folded to lines of at most ``width`` cells, breaking after its separators where it can."""
    out: list[str] = []
    for line in text.split("\n"):
        indent = line[:len(line) - len(line.lstrip(" "))]
        current = indent
        for token in BREAK.split(line[len(indent):]):
            while len(token) > width:  # a part wider than the column on its own: cut within it
                if current.strip():
                    out.append(current.rstrip())
                    current = ""
                cut = _cut(token, width)
                out.append(token[:cut])
                token = token[cut:]
            if len(current) + len(token.rstrip()) > width and current.strip():
                out.append(current.rstrip())
                current = indent if len(indent) + len(token) <= width else ""
            current += token
        out.append(current.rstrip())
    return "\n".join(out)


# inside a word: between a lower-case letter or digit and a capital, or before the last capital of a run of
# them that starts a word (CUDAKernel: CUDA|Kernel), or between letters and digits
WORD = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")


def _cut(token: str, width: int) -> int:
    """Where to cut ``token``, wider than ``width``: at the last word boundary within it (camelCase, letters
    and digits) that keeps at least a third of the width, else where the rest keeps at least 4 characters."""
    inside = [m.start() for m in WORD.finditer(token) if width // 3 <= m.start() <= width]
    if inside:
        return inside[-1]
    return width if len(token) - width >= 4 or width <= 8 else max(width // 2, len(token) - 4)


class FitTable:
    """A table of the command line (:data:`PLAIN`) that fits the console's width (module doc). ``left``:
    columns aligned left (else right); ``wrap``: name columns that fold; ``keys``: the first columns repeated
    in each part of a table shown in parts."""

    def __init__(self, title: str | None, columns: Sequence[str], *, left: Collection[str] = (),
                 wrap: Collection[str] = (), keys: int = 1) -> None:
        self.title, self.columns = title, list(columns)
        self.left, self.wrap, self.keys = set(left) | set(wrap), set(wrap), keys
        self.rows: list[list[Text]] = []

    def add_row(self, *cells: Any) -> None:
        self.rows.append([c if isinstance(c, Text) else Text.from_markup(printable("" if c is None else str(c)))
                          for c in cells])

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def _natural(self, i: int) -> int:
        """Column ``i``'s width with every value whole on its lines."""
        cells = [Text(self.columns[i]), *(r[i] for r in self.rows)]
        return max(max((Text(line).cell_len for line in c.plain.split("\n")), default=0) for c in cells)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        natural = [self._natural(i) for i in range(len(self.columns))]
        least = [min(natural[i], max(MIN_NAME, len(c))) if c in self.wrap else natural[i]
                 for i, c in enumerate(self.columns)]  # a name may fold down to this; a number never
        if sum(least) + GAP * (len(least) - 1) <= width:
            yield self._table(list(range(len(self.columns))), self._name_widths(natural, least, width))
            return
        for part, cols in enumerate(self._parts(least, width)):
            if self.title:  # above its part, as wide as the terminal (a part may be narrow)
                yield Text(printable(self.title if not part else f"{self.title} (continued)"), style="bold")
            yield self._table(cols, self._name_widths(natural, least, width, cols), titled=False)

    def _name_widths(self, natural: list[int], least: list[int], width: int,
                     cols: list[int] | None = None) -> dict[int, int]:
        """Each name column's width among ``cols`` (all): its natural width where they fit, else a share of
        the room the other columns leave (never below its least)."""
        cols = list(range(len(self.columns))) if cols is None else cols
        names = [i for i in cols if self.columns[i] in self.wrap]
        room = width - sum(natural[i] + GAP for i in cols if i not in names) - GAP * len(names) + GAP
        if sum(natural[i] for i in names) <= room:
            return {i: natural[i] for i in names}
        spare = room - sum(least[i] for i in names)
        grow = sum(natural[i] - least[i] for i in names) or 1
        return {i: least[i] + max(0, spare) * (natural[i] - least[i]) // grow for i in names}

    def _parts(self, least: list[int], width: int) -> Iterable[list[int]]:
        """The columns in parts that each fit ``width``, the key columns at the head of each."""
        keys = list(range(min(self.keys, len(self.columns))))
        head = sum(least[i] + GAP for i in keys)
        part: list[int] = []
        used = head
        for i in range(len(keys), len(self.columns)):
            if part and used + least[i] > width:
                yield keys + part
                part, used = [], head
            part.append(i)
            used += least[i] + GAP
        yield keys + part

    def _table(self, cols: list[int], name_width: dict[int, int], *, titled: bool = True) -> Table:
        out = plain_table(self.title if titled else None)
        for i in cols:
            name = self.columns[i]
            out.add_column(name, justify="left" if name in self.left else "right", no_wrap=True, overflow="fold",
                           min_width=name_width.get(i))
        for row in self.rows:
            out.add_row(*(Text(fold_name(row[i].plain, name_width[i])) if i in name_width else row[i]
                          for i in cols))
        return out
