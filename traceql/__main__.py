"""The command line's entry point: ``traceql`` and ``python -m traceql``."""

from __future__ import annotations

import gc
import os
import signal
import sys

from traceql.errors import INTERRUPTED  # light: the package itself loads it

# polars' allocator (jemalloc) keeps freed pages for 10 s by default; a command that reads a trace into
# frames and drops them step by step would hold them all. A quarter second returns them soon enough (a
# decay of 0 gives each page back at once and costs a third more time on a large run). Read by polars
# when it loads, so set first.
JEMALLOC = "dirty_decay_ms:250,muzzy_decay_ms:250"


def main() -> None:
    """Load the command line and run it; a Ctrl-C while it loads is one line and exit 130, as later."""
    os.environ.setdefault("_RJEM_MALLOC_CONF", JEMALLOC)
    try:
        from traceql.cli import app  # noqa: PLC0415 - loading it is what may be interrupted

        app(prog_name="traceql")
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # answered: a copy still pending must not kill the exit
        sys.stderr.write("error: interrupted\n")
        sys.exit(INTERRUPTED)
    finally:
        # what the command made is left as it is: the interpreter's last collections at exit would walk every
        # object it still holds (a large run's: 0.3-0.4 s, a tenth of a later command), to free what the
        # system takes back anyway
        gc.freeze()


if __name__ == "__main__":
    main()
