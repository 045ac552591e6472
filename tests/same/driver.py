"""Runs command lines of ``traceql`` in one process and writes what each printed: the half of
``tests/same/test_same_outputs.py`` that runs under the code of another commit too (so it imports nothing of
traceql but its command line, which every commit has).

    python tests/same/driver.py commands.json OUT_DIR

``commands.json``: ``[[name, [arg, ...]], ...]``. Each command runs with the current folder as its working
folder (its ``--out`` and ``-o`` files land there); ``OUT_DIR/<name>.out`` gets its exit code, standard
output and standard error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> int:
    os.environ["COLUMNS"] = "80"
    from typer.testing import CliRunner

    from traceql.cli import app, common

    commands = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    runner = CliRunner()
    for name, args in commands:
        common.configure()
        done = runner.invoke(app, args, catch_exceptions=True)
        if done.exception is not None and not isinstance(done.exception, SystemExit):
            import traceback

            text = "".join(traceback.format_exception(done.exception))
        else:
            text = ""
        (out / f"{name}.out").write_text(f"exit {done.exit_code}\n--- stdout\n{done.stdout}\n--- stderr\n"
                                         f"{done.stderr}\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
