"""Add collected runs to the matrix as light repeats: their measured step times alone, their traces left out.

    python bench/groundtruth/lighten.py --batch h100-e RUNS_DIR_OR_TAR...

Each run folder (from ``collect_matrix.py``'s tar files, or a folder of run folders) is read once, with its
traces, by the validation's own measure (``traceql.validation.whatifs.measured_steps``: each step's time as
its trace gives it, and a serialized run's hook gaps), written to ``steps.json`` beside its manifest, rank
results and logs, and copied to ``datasets/groundtruth/<batch>/<run>`` without ``traces/``. The matrix's size
budget holds no more traces; a repeat needs only its measured steps (the what-if is asked about the traced
runs). The copy is made beside the destination and renamed into place.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from traceql.validation.matrix import NAME, STEPS_FILE, MatrixRun
from traceql.validation.whatifs import measured_steps

ROOT = Path(__file__).resolve().parents[2] / "datasets" / "groundtruth"


def run_folders(sources: list[Path], scratch: Path) -> list[Path]:
    """Every run folder (one with a manifest) in ``sources``: tar files unpacked into ``scratch``."""
    out = []
    for i, src in enumerate(sources):
        if src.is_file():
            dest = scratch / f"{i}-{src.stem}"  # tar files of several batches share their names
            with tarfile.open(src) as tar:
                tar.extractall(dest, filter="data")
            src = dest
        out += [src] if (src / "manifest.json").is_file() else sorted(p.parent for p in src.glob("*/manifest.json"))
    return out


def lighten(folder: Path, batch: str, root: Path) -> Path:
    m = NAME.match(folder.name)
    if m is None or not m["world"]:
        raise SystemExit(f"{folder}: not a matrix run's name")
    run = MatrixRun(folder, batch, m["model"], m["role"], int(m["world"]), int(m["cap"]), int(m["rep"] or 1))
    steps = measured_steps(run)
    dest = root / batch / folder.name
    tmp = Path(tempfile.mkdtemp(prefix=".light-", dir=dest.parent))
    shutil.copytree(folder, tmp / "run", ignore=shutil.ignore_patterns("traces"))
    (tmp / "run" / STEPS_FILE).write_text(json.dumps(
        {"from": "the run's nsys exports, read when it was collected (not shipped)", "steps": steps.to_dicts()},
        indent=1) + "\n")
    if dest.exists():
        shutil.rmtree(dest)
    (tmp / "run").rename(dest)
    tmp.rmdir()
    return dest


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", required=True, help="the host batch's folder (<GPU kind>-<host>, e.g. h100-e)")
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("sources", type=Path, nargs="+")
    args = ap.parse_args()
    (args.root / args.batch).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        folders = run_folders(args.sources, Path(scratch))
        for i, folder in enumerate(folders, 1):
            dest = lighten(folder, args.batch, args.root)
            print(f"{i}/{len(folders)} {dest}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
