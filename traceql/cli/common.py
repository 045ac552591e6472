"""What every command of the command line shares: error handling, the console, options, progress."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import signal
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from traceql.cli import loading
from traceql.cli.fit import FitTable, fold_name, plain_table  # noqa: F401 - plain_table: the style, for frames
from traceql.cli.numbers import counted, ms, num_ms  # noqa: F401 - the commands' names
from traceql.cli.options import (  # noqa: F401 - the commands' names
    BaselineOption,
    Files,
    Format,
    FormatOption,
    HtaCompatOption,
    SchedulerOption,
    ThresholdOption,
    WorkersOption,
)
from traceql.cli.placeholders import plain
from traceql.cli.printable import CONTROL, printable, printable_json  # noqa: F401 - the command line's names
from traceql.errors import INTERNAL_ERROR, INTERRUPTED, CollectFailed, OptionError, TraceqlError

PADDING = re.compile(r" +(?=(?:\x1b\[[0-9;]*m)*\n)")  # spaces ending a line (before any closing style code)
class TrimmedConsole(Console):
    """A console whose lines end without the spaces rich pads every table cell and title with to the table's
    width (piped output, saved output and terminals alike carry no trailing spaces), and whose text — a
    kernel name, a path — never carries a control character to the terminal (:func:`printable`)."""

    def render_str(self, text: str, **kwargs: Any) -> Any:  # every string printed or put in a table (rich 13-15)
        return super().render_str(printable(text), **kwargs)

    def _render_buffer(self, buffer: Any) -> str:  # every print and capture() is rendered here (rich 13-15)
        return PADDING.sub("", super()._render_buffer(buffer))


# The terminal's width; off a terminal, COLUMNS if set, else 80: every table is laid out to fit 80 columns.
console = TrimmedConsole()
CONTEXT = {"help_option_names": ["-h", "--help"]}

try:  # typer >= 0.20 carries its own copy of click
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer, on click
    from click import exceptions as click_errors  # type: ignore[no-redef]  # the same names, from click itself


GLOBAL = ("--wide", "--quiet", "-q", "--no-cache")  # the application's own options, taken after a command's name too
GLOBAL_VALUED = ("--steps-from",)  # ... and those that take a value


def anywhere(args: Sequence[str] | None) -> list[str]:
    """The command line with the application's options (:data:`GLOBAL`, and :data:`GLOBAL_VALUED` with their
    values) moved before the command, wherever they were given (``detect X -q`` as ``-q detect X``); none moved
    after a ``--``."""
    given = list(sys.argv[1:] if args is None else args)
    end = given.index("--") if "--" in given else len(given)
    moved, rest, i = [], [], 0
    while i < end:
        a = given[i]
        if a in GLOBAL or a.split("=", 1)[0] in GLOBAL_VALUED and "=" in a:
            moved.append(a)
        elif a in GLOBAL_VALUED and i + 1 < end:
            moved += given[i:i + 2]
            i += 1
        else:
            rest.append(a)
        i += 1
    return moved + rest + given[end:]


class OneLineErrors(TyperGroup):
    """The command line's group: a usage error (an unknown option, a bad value, a missing argument) is one
    ``error:`` line on stderr and exit 2, as traceql's own option checks are, not click's box of text."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        _settings["told"] = False
        plain(self)
        try:
            code = super().main(args=anywhere(args), prog_name=prog_name, complete_var=complete_var,
                                standalone_mode=False, windows_expand_args=windows_expand_args, **extra)
        except click_errors.NoArgsIsHelpError as err:  # its making printed the help already where rich formats it
            if err.format_message().strip():
                sys.stdout.write(err.format_message() + "\n")
            code = 0
        except click_errors.ClickException as err:
            sys.stderr.write(error_line(err.format_message()) + "\n")
            code = err.exit_code
        except (typer.Abort, KeyboardInterrupt):
            code = INTERRUPTED
        if code == INTERRUPTED:
            # the Ctrl-C is answered: a copy still pending (DuckDB reports it too) must not kill the exit
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if code == INTERRUPTED and not _settings["told"]:  # typer turns a Ctrl-C into a silent exit 130
            sys.stderr.write("error: interrupted\n")
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)
WIDE = 400  # --wide: the width tables may take
_settings = {"quiet": False, "told": False}  # told: an error line has been written


def natural_width() -> int:
    """The width to print at without ``--wide``: ``COLUMNS`` if set, else the terminal's, else 80."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream.isatty():
                return os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, OSError, ValueError):  # a stream without a descriptor (captured output)
            continue
    return 80


def configure(*, wide: bool = False, quiet: bool = False, steps_from: str | None = None,
              no_cache: bool = False) -> None:
    """The global options, set afresh by every command: ``--wide`` lets tables take the width they need (else
    the natural width: one command's ``--wide`` never leaks into the next run in the same process), ``--quiet``
    hides progress, ``--steps-from`` marks the steps (``model.step_marker``; else the environment's, or the
    default markers), ``--no-cache`` reads every export itself (``commands.cache``)."""
    console.width = WIDE if wide else natural_width()
    _settings["quiet"] = quiet
    loading.load()  # first: what follows loads them (the cache's results are frames)
    from traceql.commands import cache
    from traceql.errors import OptionError
    from traceql.model import step_marker

    cache.turn_off(no_cache)

    step_marker.reset()  # one command's --steps-from never leaks into the next run in the same process
    try:
        if steps_from is not None:
            step_marker.use(steps_from)
    except OptionError as err:
        raise click_errors.UsageError(str(err)) from err


F = TypeVar("F", bound=Callable[..., Any])


def error_line(message: str) -> str:
    """``error: message`` as stderr gets it: one line whatever it holds; on a terminal, that line folded to its
    width at the text's separators (piped, or under a test, one line to grep)."""
    text = f"error: {printable(message, one_line=True)}"
    return fold_name(text, max(console.width, 40)) if sys.stderr.isatty() else text


def told(message: str) -> None:
    """Write ``error: message`` on stderr (:func:`error_line`)."""
    sys.stderr.write(error_line(message) + "\n")
    _settings["told"] = True


def fail(message: str, code: int) -> typer.Exit:
    """Write ``error: message`` on stderr; the exit to raise."""
    told(message)
    return typer.Exit(code)


LARGEST = 2**63 - 1  # the largest whole number an option may take: what the analysis's columns hold


def check_numbers(options: dict[str, Any]) -> None:
    """OptionError for a number no option can mean: NaN or infinite, or a whole number past 64 bits (the
    command line's options are named after their parameters: ``fail_above`` is ``--fail-above``)."""
    for name, value in options.items():
        option = "--" + name.replace("_", "-")
        if isinstance(value, float) and not math.isfinite(value):
            raise OptionError(f"{option} must be a finite number, got {value}")
        if isinstance(value, int) and not isinstance(value, bool) and not -LARGEST <= value <= LARGEST:
            raise OptionError(f"{option} {value}: out of range (at most {LARGEST:,} either way)")


def guarded(command: F) -> F:
    """A command whose failures end in one line on stderr and an exit code, never a traceback.

    Its numeric options are checked first (:func:`check_numbers`). A :class:`TraceqlError` gives its message
    and code; Ctrl-C gives 130; anything else is a bug in traceql: one line and 70, unless ``TRACEQL_DEBUG``
    asks for the traceback.
    """

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            check_numbers(kwargs)
            return command(*args, **kwargs)
        except CollectFailed as err:
            if err.detail:
                sys.stderr.write(printable(err.detail.rstrip()) + "\n")
            raise fail(str(err), err.exit_code) from None
        except TraceqlError as err:
            raise fail(str(err), err.exit_code) from None
        except KeyboardInterrupt:
            raise fail("interrupted", INTERRUPTED) from None
        except typer.Exit:
            raise
        except OSError as err:  # what the file system said of a path no check foresaw: a name too long, a
            if err.filename is None:  # folder it may not search; without a path, a bug of ours
                raise _internal(err) from None
            why = err.strerror or type(err).__name__
            raise fail(f"{printable(str(err.filename), one_line=True)}: {why}", 2) from None
        except Exception as exc:  # a bug, not bad input
            if _interrupted(exc):  # DuckDB's own word for a Ctrl-C
                raise fail("interrupted", INTERRUPTED) from None
            raise _internal(exc) from None

    return cast(F, run)  # functools.wraps: the same signature


def _interrupted(exc: BaseException) -> bool:
    """Whether DuckDB said ``exc`` for a Ctrl-C; False where the engine itself cannot be loaded (a broken
    install: what failed was that import, which the one line then names)."""
    try:
        from traceql.model.engine import interrupted  # noqa: PLC0415 - the CLI's start stays light
    except ImportError:
        return False
    return interrupted(exc)


def _internal(exc: BaseException) -> typer.Exit:
    """A bug in traceql: one line and exit 70 (the traceback itself with ``TRACEQL_DEBUG``)."""
    if os.environ.get("TRACEQL_DEBUG"):
        raise exc
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return fail(f"internal error ({type(exc).__name__}: {first}); "
                "rerun with TRACEQL_DEBUG=1 for the traceback and please report it", INTERNAL_ERROR)


@contextmanager
def spinner(text: str) -> Iterator[Callable[[str], None]]:
    """A spinner on a terminal while the block runs; yields ``update(text)`` (a no-op off a terminal)."""
    if _settings["quiet"] or not sys.stderr.isatty():
        yield lambda _text: None
        return
    with console.status(text, spinner="dots") as live:
        yield lambda more: live.update(f"{text} {more}")


@contextmanager
def progress_bar(text: str) -> Iterator[Callable[[int, int | None, str], None]]:
    """A progress bar on stderr while the block runs (a terminal only, not with --quiet); yields
    ``update(done, total, name)``, ``name`` being what just finished."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=TrimmedConsole(stderr=True),
                  disable=_settings["quiet"] or not sys.stderr.isatty(), transient=True) as bar:
        task = bar.add_task(text, total=None)

        def update(done: int, total: int | None, name: str) -> None:
            short = name if len(name) <= 40 else "…" + name[-39:]  # the bar keeps its place on 80 columns
            bar.update(task, description=f"{text} {escape(short)}", completed=done, total=total)

        yield update


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def indented(text: str, by: int = 2) -> None:
    """A line of a list (a verdict's finding, a cause) on stdout, ``by`` cells in, its folded lines as far in."""
    from rich.padding import Padding
    from rich.text import Text

    console.print(Padding(Text(printable(text)), (0, 0, 0, by)))


def table(title: str | None, columns: Sequence[str], *, left: Collection[str] = (),
          wrap: Collection[str] = (), keys: int = 1) -> FitTable:
    """A compact table with these columns, right-aligned except those in ``left``; the columns in ``wrap``
    (names, paths) fold onto more lines at their separators where the width runs out; numbers never wrap nor
    are cut: where they cannot stand side by side, the table is shown in parts, its first ``keys`` columns
    repeated (``traceql.cli.fit``)."""
    return FitTable(title, columns, left=left, wrap=wrap, keys=keys)
