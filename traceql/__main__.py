"""The command line's entry point: ``traceql`` and ``python -m traceql``."""

from __future__ import annotations

import gc
import os
import signal
import sys

from traceql.analyzers.machine import cores  # light: no polars
from traceql.errors import INTERRUPTED  # light: the package itself loads it

# polars' allocator (jemalloc) gives freed pages back to the system half a second after they are freed, and
# a run read a part at a time takes them again at once: two million page faults, five seconds of system
# time, in a `detect` of 1.9 M kernels on 2 cores. One arena for two cores lets every thread reuse what the
# others freed, and a second's delay lets the next part reuse what the last one dropped: 0.90x the time at the
# same peak (docs/scale.md). Read by polars when it loads, so set first; the user's own setting wins.
JEMALLOC = "narenas:{arenas},dirty_decay_ms:1000,muzzy_decay_ms:1000"


def allocator_settings() -> str:
    """What polars' allocator is told by the command line: one arena for every two cores it may run on."""
    return JEMALLOC.format(arenas=max(1, cores() // 2))


def main() -> None:
    """Load the command line and run it; a Ctrl-C while it loads is one line and exit 130, as later."""
    os.environ.setdefault("_RJEM_MALLOC_CONF", allocator_settings())
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
