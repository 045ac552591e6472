"""What a user sees is the same under the current code as under :data:`BASE`, the commit before a change meant
to alter no output (a change of the code's shape): every reading command, in JSON and at 80 columns, on the
shipped runs, and the files `detect --out`, `report` and `export perfetto` write.

:data:`BASE`'s code is taken from the repository's history (``git archive``) and run beside the current code by
the same driver (``driver.py``), each in a process of its own; the outputs are compared byte for byte (the
report's random plot ids and the minute it was made masked). A change meant to alter an output is followed by
a commit that moves :data:`BASE` to it, saying why. Skipped where the checkout has no history (an unpacked
archive)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT, RUNS

# moved to 4f25712: the causes' error_ns (null but where a long run's causes were priced from a
# sample of its steps; issue 61)
BASE = "4f25712009a709efdcd1ec39707e36d0c6af670c"
DRIVER = Path(__file__).with_name("driver.py")
UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
STAMP = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d")  # the minute a page was made
INRUN = ROOT / "datasets" / "inrun" / "gpt2-inrun-nsys"
EXAMPLES = ROOT / "datasets" / "examples"
GRADIENTS = EXAMPLES / "gpt2" / "gradients.json"
# the shipped runs, one of each kind: nsys exports of one file and of one per rank, torch.profiler traces, an
# in-run collection, straggler runs of 2 and 4 ranks, FSDP, tensor and sequence parallelism, recorded sizes
TRACES = {
    "inrun": [INRUN],
    "straggler": [RUNS / "gpt2-straggler-nsys"],
    "straggler_torch": [RUNS / "gpt2-straggler-torch"],
    "straggler_4rank": [RUNS / "gpt2-4rank-straggler-nsys"],
    "pair": [RUNS / "gpt2-pair-nsys"],
    "fsdp_torch": [RUNS / "fsdp2-pair-torch"],
    "fsdp_baseline": [RUNS / "gpt2-fsdp2-nsys", "--baseline", RUNS / "gpt2-fsdp2-single-nsys"],
    "tp_straggler": [RUNS / "block-tp-straggler-nsys"],
    "seqpar": [RUNS / "seqpar-nsys"],
    "resnet_inrun": [RUNS / "resnet50-inrun-nsys"],
    "llama_cap2": [RUNS / "llama-4rank-cap2-nsys"],
}


def commands() -> list[tuple[str, list[str]]]:
    """Every command line compared: name -> arguments."""
    out: list[tuple[str, list[str]]] = []
    for name, given in [("embedded", []), *TRACES.items()]:
        args = [str(a) for a in given]
        out += [(f"detect-{name}", ["detect", *args, "--format", "json", "--out", f"{name}.parquet"]),
                (f"ranks-{name}", ["ranks", *args, "--format", "json"]),
                (f"whatif-{name}", ["whatif", *args, "--format", "json"]),
                (f"info-{name}", ["info", *args[:1], "--format", "json"]),
                (f"collectives-{name}", ["collectives", *args[:1], "--format", "json"])]
    for name in ("embedded", "straggler", "straggler_4rank"):
        args = [str(a) for a in TRACES.get(name, [])]
        out += [(f"detect-text-{name}", ["detect", *args]), (f"ranks-text-{name}", ["ranks", *args, "--steps", "5"]),
                (f"whatif-text-{name}", ["whatif", *args]), (f"collectives-text-{name}", ["collectives", *args])]
    out += [
        ("whatif-cap", ["whatif", str(RUNS / "gpt2-pair-nsys"), "--bucket-cap", "2", "--format", "json"]),
        ("whatif-cap-text", ["whatif", "--bucket-cap", "2", "--gradients",
                             str(GRADIENTS)]),
        ("collectives-gradients", ["collectives", "--gradients", str(GRADIENTS)]),
        ("collectives-steps", ["collectives", str(RUNS / "llama-4rank-cap25-nsys"), "--steps"]),
        ("diff", ["diff", str(ROOT / "datasets" / "default" / "gpt2-nsys"), str(INRUN), "--format", "json"]),
        ("diff-text", ["diff", str(RUNS / "gpt2-straggler-nsys"), str(RUNS / "gpt2-balanced-nsys")]),
        ("query", ["query", str(RUNS / "gpt2-pair-nsys"),
                   "SELECT op, count(*) AS n, sum(bytes) AS b FROM collectives GROUP BY ALL ORDER BY ALL"]),
        ("report-embedded", ["report", "-o", "embedded.html"]),
        ("report-straggler", ["report", str(RUNS / "gpt2-straggler-nsys"), "-o", "straggler.html"]),
        ("perfetto", ["export", "perfetto", "-o", "embedded.json"]),
        ("profile-buckets", ["profile", "buckets", *(str(RUNS / f"gpt2-b16-cap{c}-{p}") for c, p in
                                                     (("2", "none"), ("25", "nsys"), ("100", "none"))),
                             "--out", "profiles"]),
        ("solve", ["solve", str(EXAMPLES / "profiles" / "gpt2"), "--global-batch", "64", "--cluster",
                   str(EXAMPLES / "clusters" / "h200-h100.json"), "--format", "json"]),
        ("solve-text", ["solve", str(EXAMPLES / "profiles" / "gpt2"), "--global-batch", "32", "--cluster",
                        str(EXAMPLES / "clusters" / "two-h200.json")]),
    ]
    return out


def _base_tree(where: Path) -> Path:
    """:data:`BASE`'s package, unpacked into ``where`` as installed: the leaves and the data inside ``traceql``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BASE, "traceql", "analyzers", "collectors",
                              "datasets/default", "datasets/README.md"], capture_output=True, check=False)
    if archive.returncode != 0:
        pytest.skip(f"no commit {BASE[:12]} in this checkout's history: {archive.stderr.decode().strip()}")
    where.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    for leaf in ("analyzers", "collectors", "datasets"):
        (where / "traceql" / leaf).symlink_to(where / leaf)
    return where


def _shadow_tree(where: Path) -> Path:
    """The current code laid out the same way (links into the checkout)."""
    (where / "traceql").mkdir(parents=True)
    for item in (ROOT / "traceql").iterdir():
        (where / "traceql" / item.name).symlink_to(item)
    for leaf in ("analyzers", "collectors", "datasets"):
        (where / "traceql" / leaf).symlink_to(ROOT / leaf)
    return where


def _start(code: Path, work: Path, listed: Path) -> subprocess.Popen[bytes]:
    work.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(code), "TRACEQL_SCRATCH": str(work)}
    return subprocess.Popen([sys.executable, str(DRIVER), str(listed), str(work / "out")], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _files(work: Path, code: Path) -> dict[str, bytes]:
    """What the commands run in ``work`` printed and wrote, the folders of the run, the data and the code masked."""
    found = {}
    for path in sorted(work.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".html":
                data = STAMP.sub(b"stamp", UUID.sub(b"uuid", data))
            masks = ((work, b"WORK"), (code / "traceql" / "datasets", b"DATA"), (ROOT / "datasets", b"DATA"),
                     (code, b"CODE"))
            for folder, mask in masks:
                data = data.replace(str(folder).encode(), mask)
            found[str(path.relative_to(work))] = data
    return found


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="no git history")
def test_outputs_are_those_of_the_base_commit(tmp_path: Path) -> None:
    listed = tmp_path / "commands.json"
    listed.write_text(json.dumps(commands()))
    old = _start(_base_tree(tmp_path / "base"), tmp_path / "old", listed)
    new = _start(_shadow_tree(tmp_path / "now"), tmp_path / "new", listed)
    logs = [p.communicate()[0].decode() for p in (old, new)]
    assert old.returncode == 0 and new.returncode == 0, logs
    before, after = _files(tmp_path / "old", tmp_path / "base"), _files(tmp_path / "new", tmp_path / "now")
    assert len(before) > len(commands()), sorted(before)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == [], {k: (before.get(k, b"")[:300], after.get(k, b"")[:300]) for k in changed[:3]}
    failed = [k for k, v in after.items() if k.endswith(".out") and not v.startswith(b"exit 0")]
    assert failed == [], failed
