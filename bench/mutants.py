"""Hand-made mutants: each breaks one thing a user relies on, and at least one test must then fail.

    python bench/mutants.py            # every mutant
    python bench/mutants.py --list     # what each changes, and the tests that must catch it
    python bench/mutants.py threshold  # the mutants whose name holds the word

Each mutant replaces one exact piece of code (found exactly once in its file) and runs the tests named for it.
First the tests run on the code as it is and must pass; then on each mutant, and at least one must fail (the
mutant is *killed*); a mutant that passes *survived*, and the script exits 1. The file is restored after each
mutant, also on Ctrl-C (a process killed outright leaves it changed: ``git checkout FILE``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


# two rungs of the within-trace reference order (analyzers/baselines/within_trace.py), one a line
NEARLY_CLEAN_MIN = ('("position-min", pl.when(pl.col("position_min_frac") < NEARLY_CLEAN)'
                    '.then(pl.col("position_min_ns"))),')
KEY_MEDIAN = '("key", pl.col("key_clean_ns")),'
CHOICE = " " * 15  # their indent

MUTANTS = [
    Mutant("threshold-ignored", "detect ignores --threshold (always the default 1.2)",
           "traceql/commands/detect.py", "baseline=baseline, threshold=threshold,",
           "baseline=baseline, threshold=PAIRED_FACTOR,",
           ("tests/cli/test_detect.py::test_threshold_sets_the_cases_as_the_twin_definition_does",)),
    Mutant("info-mean-plus-1us", "info's mean kernel time one microsecond more",
           "traceql/commands/info.py", '(pl.col("total_ns") / pl.col("count")).round().alias("mean_ns")',
           '(pl.col("total_ns") / pl.col("count") + 1000).round().alias("mean_ns")',
           ("tests/sources/test_counts.py::test_top_kernels_match_sqlite3",)),
    Mutant("info-share-halved", "info's share of kernel time halved",
           "traceql/commands/info.py", "(100.0 * pl.col(\"total_ns\") / max(total_ns, 1))",
           "(50.0 * pl.col(\"total_ns\") / max(total_ns, 1))",
           ("tests/sources/test_counts.py::test_top_kernels_match_sqlite3",)),
    Mutant("info-collective-plus-one", "info counts one collective more",
           "traceql/commands/info.py", "SELECT collective, count(*) AS count,",
           "SELECT collective, count(*) + 1 AS count,",
           ("tests/sources/test_counts.py::test_collectives_match_sqlite3",)),
    Mutant("warning-count-dropped", "the warning on kernels with unknown names no longer counts them",
           "traceql/sources/nsys_kernels.py", "kernels: {n:,} kernels name string ids",
           "kernels: kernels name string ids",
           ("tests/bad_inputs/test_corpus.py::test_bad_input[sqlite-dangling_string_ids]",
            "tests/bad_inputs/test_corpus.py::test_bad_input[sources-dangling_name_ids]")),
    Mutant("console-left-wide", "--wide stays on for the commands run after it in the same process",
           "traceql/cli/common.py", "console.width = WIDE if wide else natural_width()",
           "console.width = WIDE if wide else console.width",
           ("tests/cli/test_console.py",)),
    Mutant("overlap-unmerged-comm", "a kernel's overlap measured against the communication kernels as they are, "
           "not merged into their union (wrong wherever two ran at once on one device)",
           "analyzers/overlap.py", "us, ue = merge(ms, me)", "us, ue = ms, me",
           ("tests/analyzers/test_overlap_union.py",)),
    Mutant("straggler-past-measured", "the straggler what-if lets an activity take its typical duration where "
           "that is longer than it took",
           "analyzers/replay/without_straggler.py", "dur=np.minimum(g.dur, _typical_durations(rg, named)))",
           "dur=_typical_durations(rg, named))",
           ("tests/analyzers/test_straggler_bounds.py",)),
    Mutant("dataset-json-in-place", "dataset add rewrites dataset.json in place (a reader may see it empty or cut)",
           "traceql/dataset/store.py", "atomic_write(self.meta_path, lambda fh: fh.write(data))",
           "self.meta_path.write_bytes(data)",
           ("tests/dataset/test_concurrent_reader.py",)),
    Mutant("diff-pairs-isolated-steps", "diff pairs the kernels of isolated steps too, not only of normal steps",
           "analyzers/diff.py", '(pl.col("kind") == "compute") & (pl.col("step_kind") == "sync")',
           '(pl.col("kind") == "compute") & pl.col("step").is_not_null()',
           ("tests/analyzers/test_diff_steps.py",)),
    Mutant("tick-guard-off-by-one", "an excess of exactly two clock ticks is taken for a slowdown",
           "analyzers/baselines/physical.py", '(pl.col("duration_ns") - baseline) > TICKS * pl.col("tick_ns")',
           '(pl.col("duration_ns") - baseline) >= TICKS * pl.col("tick_ns")',
           ("tests/analyzers/test_trust_offline.py",)),
    Mutant("replica-alike-as-distance", "two ranks' step-bag similarity read as a distance (1 - similarity at "
           "most ALIKE): a shard is taken for a replica",
           "analyzers/baselines/replicas.py", "_similarity(mine, head_bag) >= ALIKE",
           "1 - _similarity(mine, head_bag) <= ALIKE",
           ("tests/analyzers/test_trust_offline.py",)),
    Mutant("reference-order-swapped", "a borrowed reference (the key's clean median) preferred to the position's "
           "nearly clean shortest instance",
           "analyzers/baselines/within_trace.py",
           f"{NEARLY_CLEAN_MIN}\n{CHOICE}{KEY_MEDIAN}", f"{KEY_MEDIAN}\n{CHOICE}{NEARLY_CLEAN_MIN}",
           ("tests/analyzers/test_reference_order.py",)),
]


def run_tests(tests: tuple[str, ...]) -> tuple[int, float]:
    """pytest's exit code and the seconds it took, on ``tests`` (stop at the first failure)."""
    start = time.perf_counter()
    code = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
                          cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return code, time.perf_counter() - start


def mutated(mutant: Mutant) -> tuple[int, float]:
    """Run the mutant's tests with its change in place; the file comes back whatever happens."""
    path = ROOT / mutant.file
    original = path.read_text()
    if original.count(mutant.old) != 1:
        raise SystemExit(f"error: {mutant.file}: the code mutant {mutant.name} changes is not there exactly once "
                         "(the code moved: update bench/mutants.py)")
    try:
        path.write_text(original.replace(mutant.old, mutant.new))
        return run_tests(mutant.tests)
    finally:
        path.write_text(original)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("words", nargs="*", help="only the mutants whose name holds one of these")
    ap.add_argument("--list", action="store_true", help="print the mutants and their tests, run nothing")
    args = ap.parse_args()
    chosen = [m for m in MUTANTS if not args.words or any(w in m.name for w in args.words)]
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.what}\n  {m.file}: {m.old!r} -> {m.new!r}\n  tests: {' '.join(m.tests)}")
        return 0
    tests = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
    code, took = run_tests(tests)
    print(f"unmutated: {'pass' if code == 0 else f'FAIL (pytest exit {code})'} in {took:.0f} s")
    if code != 0:
        return 1
    print(f"{'mutant':<26}{'pytest':>7}{'s':>6}  verdict")
    survived = 0
    for m in chosen:
        code, took = mutated(m)
        killed = code == 1  # tests ran and one failed (2-5: interrupted, usage, internal, none collected)
        survived += not killed
        print(f"{m.name:<26}{code:>7}{took:>6.0f}  {'killed' if killed else 'SURVIVED'}")
    print(f"{len(chosen) - survived} of {len(chosen)} mutants killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
