"""The outputs the README and the docs show, against what their commands print now (at 80 columns, in a folder
beside the shipped ``datasets``, as ``tests/test_docs.py`` runs them).

    python bench/docs_outputs.py            # which blocks differ, and how
    python bench/docs_outputs.py --write    # rewrite the blocks that show a whole output; excerpts (``...``)
                                            # are only reported: pick their lines by hand
"""

from __future__ import annotations

import argparse
import difflib
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.test_docs import SHARED_NSYS, outputs  # noqa: E402


def printed(line: str) -> list[str]:
    """What ``line`` prints (stderr, then stdout), run as the docs' test runs it."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "datasets").symlink_to(ROOT / "datasets")
        args = shlex.split(line)[1:]
        for name in args:
            if name.endswith(".sqlite") and "/" not in name and (SHARED_NSYS / name).is_file():
                (Path(tmp) / name).symlink_to(SHARED_NSYS / name)
        done = subprocess.run([sys.executable, "-m", "traceql", *args], cwd=tmp, capture_output=True, text=True,
                              env={**os.environ, "COLUMNS": "80"})
    return [x.rstrip() for x in (done.stderr + done.stdout).splitlines()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the blocks that show a whole output")
    args = ap.parse_args()
    for page, line, shown in outputs():
        now = printed(line)
        if "..." in shown:
            missing = [x for x in shown if x != "..." and x.rstrip() not in now]
            if missing:
                print(f"{page}: {line}: an excerpt; lines no longer printed:", *missing, sep="\n  ")
            continue
        body = [x for x in now if not x.startswith(("note:", "warning:"))] if not any(
            x.startswith(("note:", "warning:")) for x in shown) else now
        if [x.rstrip() for x in shown] == body:
            continue
        print(f"{page}: {line}:")
        print("\n".join(difflib.unified_diff(shown, body, lineterm="", n=1)))
        if args.write:
            path = ROOT / page
            text = path.read_text()
            old, new = "\n".join(shown) + "\n", "\n".join(body) + "\n"
            if text.count(old) == 1:
                path.write_text(text.replace(old, new))
                print(f"  rewritten in {page}")


if __name__ == "__main__":
    main()
