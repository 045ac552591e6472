"""Every verdict scored on the ground-truth matrix, CPU only: labels (each model family held out, the library
models' runs with twins included: ``--library``, ``--families``), serialized, stragglers; the serialized what-if
on the library models' runs too, and the intervals each class of run earned.

    python bench/validate.py [--root datasets/groundtruth] [--library datasets/library]
                             [--families datasets/families] [--write]

Prints the validation page; with ``--write`` also writes it to ``docs/validation.md``, the figures behind it
to ``datasets/groundtruth/validation.json`` (a test keeps the page equal to what they render, and spot-checks
the figures against the runs), the what-if's measured error to ``traceql/verdicts/measured.json``, the
estimates' learned factors to ``analyzers/baselines/factors.json`` and each command page's "Measured on the
ground-truth matrix" sentence.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import polars as pl

from traceql.analyzers.baselines.learned import FACTORS, GPU_KINDS, SCHEMA, write
from traceql.validation import load_matrix
from traceql.validation.page import render, verdict_errors
from traceql.validation.report import results
from traceql.verdicts.measured import summarise

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--library", type=Path, default=ROOT / "datasets" / "library",
                    help="library models' runs: their serialized what-if scored too (launch-bound)")
    ap.add_argument("--families", type=Path, default=ROOT / "datasets" / "families",
                    help="library models' stock runs with twins on another GPU kind: their labels scored too")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    matrix = load_matrix(args.root)
    library = load_matrix(args.library) if args.library.is_dir() else None
    labelled = [load_matrix(args.families)] if args.families.is_dir() else []
    res = results(matrix, lambda text: print(f"{time.perf_counter() - t0:6.1f} s  {text}", file=sys.stderr,
                                             flush=True), library, labelled)
    page = render(res)
    print(page)
    if args.write:
        (ROOT / "docs" / "validation.md").write_text(page + "\n")
        (matrix.root / "validation.json").write_text(json.dumps(res, indent=1) + "\n")
        (ROOT / "traceql" / "verdicts" / "measured.json").write_text(json.dumps(summarise(res), indent=1) + "\n")
        kinds = [k.upper() for k in GPU_KINDS]
        runs = [r for r in res["labels"] if r["kind"] in GPU_KINDS]
        note = f"{len(runs)} stock runs with twins of the matrix and the library models ({', '.join(kinds)})"
        FACTORS.write_text(write(pl.DataFrame(res["factors"]["all"], schema=SCHEMA, orient="row"), note, kinds,
                                 sorted({r["family"] for r in runs})))
        for page, sentence in verdict_errors(res).items():
            path = ROOT / "docs" / page
            lines = path.read_text().splitlines()
            at = [i for i, line in enumerate(lines) if line.startswith("Measured on the [ground-truth matrix]")]
            if len(at) != 1:
                raise SystemExit(f"{path}: no single line to hold its measured error")
            lines[at[0]] = sentence
            path.write_text("\n".join(lines) + "\n")
    print(f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
