"""Write the twin labels of every stock run of the ground-truth matrix beside it.

    python bench/groundtruth/make_labels.py [--root datasets/groundtruth] [--missing]

Each stock run is labelled against its model's isolated twin (``traceql detect STOCK --baseline TWIN``);
``<gpu>/labels/<run>.parquet`` keeps each compute kernel of the run with its step, overlap, twin baseline,
reference kind, ratio and label (``--missing``: only the runs without labels yet, e.g. a new host batch's).
These are the truth ``bench/validate.py`` scores every other label against.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from traceql.validation import load_matrix
from traceql.validation.scoring import twin_labels, write_labels


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--missing", action="store_true", help="label only the stock runs without labels")
    args = ap.parse_args()
    matrix = load_matrix(args.root)
    for cfg in matrix.configurations():
        if cfg.twin is None:  # a batch of bucket-cap pairs only (h100-d): nothing to label against
            continue
        for run in cfg.stock:
            if args.missing and matrix.labels_path(run).is_file():
                continue
            t0 = time.perf_counter()
            frame = twin_labels(run, cfg.twin)
            write_labels(frame, matrix.labels_path(run))
            print(f"{run.gpu} {run.name:34} {frame.height:>7,} kernels {int(frame['is_slowdown'].sum()):>6,} cases "
                  f"{time.perf_counter() - t0:5.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
