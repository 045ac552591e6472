"""Run Holistic Trace Analysis on Kineto trace folders and print its per-rank numbers as JSON.

    pip install holistictraceanalysis==0.5.0      # in a separate environment
    python bench/hta_oracle.py DIR [DIR ...] > tests/data/hta_oracle.json

For each folder (one or more per-rank traces): TraceAnalysis(trace_dir=DIR).get_comm_comp_overlap() and
.get_temporal_breakdown(), both with visualize=False. tests/test_hta_parity.py compares
`traceql detect --hta-compat` against the stored output.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import warnings
from pathlib import Path


def analyse(folder: str) -> dict:
    from hta.trace_analysis import TraceAnalysis  # the oracle, not a dependency of traceql

    t = TraceAnalysis(trace_dir=folder)
    overlap = t.get_comm_comp_overlap(visualize=False)
    temporal = t.get_temporal_breakdown(visualize=False)
    ranks = {}
    for _, row in temporal.iterrows():
        rank = int(row["rank"])
        pct = float(overlap.loc[overlap["rank"] == rank, "comp_comm_overlap_pctg"].iloc[0])
        ranks[str(rank)] = {
            "comm_comp_overlap_pct": None if math.isnan(pct) else pct,
            "idle_us": float(row["idle_time(us)"]),
            "compute_us": float(row["compute_time(us)"]),
            "non_compute_us": float(row["non_compute_time(us)"]),
            "kernel_time_us": float(row["kernel_time(us)"]),
        }
    return ranks


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    import hta

    out = {"produced_by": f"holistictraceanalysis {getattr(hta, '__version__', '0.5.0')}, bench/hta_oracle.py",
           "folders": {}}
    for folder in sys.argv[1:]:
        out["folders"][Path(folder).as_posix()] = analyse(folder)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
