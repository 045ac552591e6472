"""`collectives` on damaged size records: a run folder's DDP buckets that are not byte counts, NCCL payloads cut
short or naming no schema, torch.profiler records with sizes that are not counts."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

from tests.bad_inputs.scenario import Scenario, case
from tests.paths import RUNS

NO_SIZE = "carry no size"


def _run(tmp: Path, name: str) -> Path:
    return Path(shutil.copytree(RUNS / name, tmp / name))


@case("collectives")
def ddp_buckets_that_are_words(tmp: Path) -> Scenario:
    run = _run(tmp, "gpt2-4rank-cap2-nsys")
    result = run / "results" / "rank0.json"
    data = json.loads(result.read_text())
    data["ddp_buckets"] = ["big", "small"]
    result.write_text(json.dumps(data))
    return Scenario(["collectives", run], 2, "ddp_buckets must be a list of byte counts", result, [result])


def _payloads(tmp: Path, statement: str) -> tuple[Path, list[Path]]:
    run = _run(tmp, "gpt2-pair-nsys")
    exports = sorted((run / "traces").glob("*.sqlite"))
    for export in exports:
        con = sqlite3.connect(export)
        con.execute(statement)
        con.commit()
        con.close()
    (run / "results" / "rank0.json").write_text("{}")  # no buckets to fall back on
    (run / "results" / "rank1.json").write_text("{}")
    return run, exports


@case("collectives")
def nccl_payloads_cut_short(tmp: Path) -> Scenario:
    run, exports = _payloads(tmp, "UPDATE NVTX_EVENTS SET binaryData = substr(binaryData, 1, 20) "
                                  "WHERE binaryData IS NOT NULL")
    return Scenario(["collectives", run], 0, NO_SIZE, None, exports)


@case("collectives")
def nccl_payloads_of_an_unknown_schema(tmp: Path) -> Scenario:
    run, exports = _payloads(tmp, "DELETE FROM NVTX_PAYLOAD_SCHEMA_ENTRIES")
    return Scenario(["collectives", run], 0, NO_SIZE, None, exports)


@case("collectives")
def nccl_payloads_placed_past_their_end(tmp: Path) -> Scenario:
    run, exports = _payloads(tmp, "UPDATE NVTX_EVENTS SET binaryData = substr(binaryData, 1, 24) "
                                  "|| CAST(x'ffffffffffffff7f' AS BLOB) || substr(binaryData, 33) "
                                  "WHERE binaryData IS NOT NULL")
    return Scenario(["collectives", run], 0, NO_SIZE, None, exports)


@case("collectives")
def kineto_sizes_that_are_not_counts(tmp: Path) -> Scenario:
    source = RUNS / "gpt2-pair-torch" / "traces" / "gpt2-pair-torch_rank0.json.gz"
    doc = json.loads(gzip.decompress(source.read_bytes()))
    for ev in doc["traceEvents"]:
        args = ev.get("args") if isinstance(ev, dict) else None
        if isinstance(args, dict):
            for key, bad in (("In msg nelems", -7), ("Out msg nelems", "many"), ("dtype", ["Float"]),
                             ("Input Dims", "x")):
                if key in args:
                    args[key] = bad
    path = tmp / "rank0.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return Scenario(["collectives", path], 0, NO_SIZE, None, [path])


@case("collectives")
def gradients_whose_sizes_are_words(tmp: Path) -> Scenario:
    grads = tmp / "gradients.json"
    grads.write_text(json.dumps({"param_bytes": ["wte", "wpe"], "bucket_cap_mb": 25}))
    return Scenario(["collectives", "--gradients", grads], 2, "param_bytes must be a list of byte counts", grads,
                    [grads])
