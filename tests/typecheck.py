"""The type check `.ci/run` runs: mypy over the package as it is installed (``analyzers/`` and ``collectors/`` inside
``traceql``, as setup.py maps them), its settings in pyproject.toml.

    python -m tests.typecheck [MYPY OPTIONS]

The repository keeps the leaves beside ``traceql/``, where mypy would not find them as ``traceql.analyzers``: the
check runs over a folder of links laid out as installed, and names the repository's files in what it prints.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEAVES = ("analyzers", "collectors")


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="traceql-types-") as tmp:
        package = Path(tmp) / "traceql"
        package.mkdir()
        for item in (ROOT / "traceql").iterdir():
            if item.name != "__pycache__":
                (package / item.name).symlink_to(item)
        for leaf in LEAVES:
            (package / leaf).symlink_to(ROOT / leaf)
        done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                               "--cache-dir", str(ROOT / ".mypy_cache"), "-p", "traceql", *argv],
                              cwd=tmp, capture_output=True, text=True)
    out = done.stdout
    for leaf in LEAVES:  # the repository's own paths
        out = out.replace(f"traceql/{leaf}/", f"{leaf}/")
    sys.stdout.write(out)
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
