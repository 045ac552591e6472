"""A reader of dataset.json never sees it half-written: a process reads and parses it in a tight loop while
`dataset add` records real runs into the dataset, then while more entries are recorded through the same store
(each record rewrites the whole file, which grows with every entry). Every read must parse, hold the dataset's
format and never fewer entries than a read before it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

from tests.paths import RUNS
from traceql.commands import dataset
from traceql.dataset.store import Dataset

SOURCES = [RUNS / "seqpar-nsys"]  # the quickest shipped run to label (about 1 s)
RECORDS = 40  # entries recorded after it: dataset.json grows to about 50 kB

# reads dataset.json until the stop file appears, and once more after (the last write is read too); prints how
# many reads parsed, how many saw a file that was not a whole dataset.json (and the first few errors), and the
# entry counts seen
READER = r"""
import json, sys
from pathlib import Path
path, stop = Path(sys.argv[1]), Path(sys.argv[2])
reads, bad, errors, counts, seen, last = 0, 0, [], [0], False, False
while not last:
    last = stop.exists()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if seen:
            bad += 1
            errors.append("the file was missing")
        continue
    seen = True
    reads += 1
    try:
        meta = json.loads(data)
        entries = len(meta["entries"])
        assert isinstance(meta["format"], str) and entries >= counts[-1], f"{entries} entries after {counts[-1]}"
        if entries > counts[-1]:
            counts.append(entries)
    except Exception as exc:
        bad += 1
        if len(errors) < 5:
            errors.append(f"{type(exc).__name__}: {exc} ({len(data)} bytes)")
print(json.dumps({"reads": reads, "bad": bad, "errors": errors, "counts": counts[1:]}))
"""


def test_a_reader_never_sees_a_torn_dataset_json(tmp_path: Path) -> None:
    root, stop = tmp_path / "ds", tmp_path / "stop"
    root.mkdir()
    reader = subprocess.Popen([sys.executable, "-c", READER, str(root / "dataset.json"), str(stop)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)  # the reader is looping before the first write
        outcomes = dataset.add(root, SOURCES)
        assert [o.status for o in outcomes] == ["added"] * len(SOURCES), [o.message for o in outcomes]
        store = Dataset(root)
        entry_id, entry = next(iter(store.read()["entries"].items()))
        rows = pl.read_parquet(root / entry["file"])
        info = {k: v for k, v in entry.items() if k not in ("model", "config", "file", "rows", "added")}
        for i in range(RECORDS):
            assert store.add(f"{entry_id}-{i}", entry["model"], f"{entry['config']}-{i}", rows, info) is not None
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    seen = json.loads(out)
    assert seen["bad"] == 0, f"{seen['bad']} of {seen['reads']} reads saw no whole dataset.json: {seen['errors']}"
    assert len(seen["counts"]) >= 10  # it read the file between rewrites, not only once at the end
    recorded = json.loads((root / "dataset.json").read_text())["entries"]
    assert seen["counts"][-1] == len(SOURCES) + RECORDS == len(recorded)  # and it read the last one
