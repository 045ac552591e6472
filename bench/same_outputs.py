"""Every output a user keeps, hashed: to show that a change of the code's shape changed none of them.

    python bench/same_outputs.py --save before.json      # on the old code
    python bench/same_outputs.py --check before.json     # on the new code: exit 1 on any difference

Runs the installed ``traceql`` command (as a user does) over the embedded example, the in-run collection,
the shared h200-ddp pairs and the Kineto toy run (both skipped when ../shared is absent): `detect --format
json` and `--out` parquet, `ranks --format json`, `diff --format json`, `report` (the page, its plot ids
and the minute it was made masked: plotly draws a random id per figure) and `export perfetto`.
Prints one line per output.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "datasets" / "h200-ddp"
NSYS = SHARED / "nsys"
UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
STAMP = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d")  # the minute the page was made


def inputs() -> dict[str, list[str]]:
    """Name -> the command line's inputs (files, then --baseline ...)."""
    out = {"embedded": [], "inrun": [str(ROOT / "datasets" / "inrun" / "gpt2-inrun-nsys")]}
    if SHARED.is_dir():
        for model in ("gpt2", "toy"):
            for cap in ("cap2", "cap25"):
                out[f"{model}_{cap}"] = [str(NSYS / f"{model}_ddp2_{cap}.sqlite"), "--baseline",
                                         str(NSYS / f"{model}_single.sqlite")]
        out["kineto_toy"] = [str(SHARED / "kineto" / "toy_ddp2_cap25")]
    return out


def diffs() -> dict[str, list[str]]:
    out = {"embedded_vs_inrun": [str(ROOT / "datasets" / "default" / "gpt2-nsys"),
                                 str(ROOT / "datasets" / "inrun" / "gpt2-inrun-nsys")]}
    if SHARED.is_dir():
        out["gpt2_cap2_vs_cap25"] = [str(NSYS / "gpt2_ddp2_cap2.sqlite"), str(NSYS / "gpt2_ddp2_cap25.sqlite")]
    return out


def run(args: list[str], cwd: Path) -> bytes:
    done = subprocess.run(["traceql", "--quiet", *args], cwd=cwd, capture_output=True, check=False)
    if done.returncode != 0:
        sys.exit(f"traceql {' '.join(args)} failed ({done.returncode}): {done.stderr.decode().strip()}")
    return done.stdout


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def outputs(work: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, args in inputs().items():
        parquet = work / f"{name}.parquet"
        found[f"detect json {name}"] = digest(run(["detect", *args, "--format", "json", "--out", str(parquet)], work))
        found[f"detect out {name}"] = digest(parquet.read_bytes())
        found[f"ranks json {name}"] = digest(run(["ranks", *args, "--format", "json"], work))
        page = work / f"{name}.html"
        run(["report", *args, "-o", str(page)], work)
        found[f"report {name}"] = digest(STAMP.sub(b"stamp", UUID.sub(b"uuid", page.read_bytes())))
        chrome = work / f"{name}.json"
        run(["export", "perfetto", *args, "-o", str(chrome)], work)
        found[f"perfetto {name}"] = digest(chrome.read_bytes())
        print(f"{name}: done", file=sys.stderr)
    for name, (before, after) in diffs().items():
        found[f"diff json {name}"] = digest(run(["diff", before, after, "--format", "json"], work))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path, help="write the outputs' hashes here")
    group.add_argument("--check", type=Path, help="compare the outputs with the hashes saved here")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        found = outputs(Path(tmp))
    if opts.save:
        opts.save.write_text(json.dumps(found, indent=1) + "\n")
        print(f"{len(found)} outputs hashed into {opts.save}")
        return 0
    saved = json.loads(opts.check.read_text())
    changed = 0
    for key in sorted(saved.keys() | found.keys()):
        same = saved.get(key) == found.get(key)
        changed += not same
        print(f"{'same   ' if same else 'CHANGED'}  {key}")
    print(f"{len(found) - changed} of {len(saved.keys() | found.keys())} outputs byte-identical")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
