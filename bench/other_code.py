"""Another version of traceql beside this one, to time the two side by side (``farm-bench --vs``).

    python bench/other_code.py REV DIR      # then: cd DIR && python -m traceql ...

Makes ``DIR`` a git worktree of ``REV`` whose ``traceql`` package holds its own ``analyzers``, ``collectors``
and ``datasets`` (links, as the installed package holds them), and checks that a command run from ``DIR``
imports every part from there. Both matter: Python puts the working folder first on its path, so a command
run from this checkout imports this checkout whatever ``PYTHONPATH`` says; and the editable install maps
``traceql.analyzers`` to this checkout's ``analyzers/``, so a worktree without the links imports its
``traceql`` with this checkout's analysis.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

LEAVES = ("analyzers", "collectors", "datasets")
CHECK = "import traceql.analyzers.replay.stored as a, traceql.trace as t; print(a.__file__); print(t.__file__)"


def make(rev: str, where: Path) -> list[Path]:
    """``where``, a worktree of ``rev`` with its leaves linked into its package; the files a command run from
    it imports (to check)."""
    here = Path(__file__).resolve().parents[1]
    subprocess.run(["git", "-C", str(here), "worktree", "add", "--detach", str(where), rev], check=True)
    for leaf in LEAVES:
        link = where / "traceql" / leaf
        if not link.exists():
            link.symlink_to(Path("..") / leaf)
    out = subprocess.run([sys.executable, "-c", CHECK], cwd=where, capture_output=True, text=True, check=True)
    return [Path(line) for line in out.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the version: a commit, a tag, a branch")
    parser.add_argument("dir", type=Path, help="where to put it (a new folder)")
    args = parser.parse_args()
    where = args.dir.resolve()
    imported = make(args.rev, where)
    outside = [str(p) for p in imported if where not in p.resolve().parents]
    if outside:
        sys.exit(f"{where}: a command run from it imports {', '.join(outside)}: not its own code")
    print(f"{where}: {args.rev}; run it from there: cd {where} && python -m traceql ...")


if __name__ == "__main__":
    main()
