"""The command line's entry point: ``traceql`` and ``python -m traceql``."""

from __future__ import annotations

import sys

from traceql.errors import INTERRUPTED  # light: the package itself loads it


def main() -> None:
    """Load the command line and run it; a Ctrl-C while it loads is one line and exit 130, as later."""
    try:
        from traceql.cli import app  # noqa: PLC0415 - loading it is what may be interrupted

        app(prog_name="traceql")
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        sys.exit(INTERRUPTED)


if __name__ == "__main__":
    main()
