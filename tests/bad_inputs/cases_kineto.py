"""torch.profiler (Kineto) JSON traces: broken, foreign, with odd, impossible or duplicated events."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bad_inputs.scenario import (
    KINETO,
    Scenario,
    case,
    detect,
    kernels_only,
    kineto_compute,
    kineto_copy,
    kineto_events,
    kineto_kernels,
)


def _seventh(e: dict) -> bool:
    """The kernels the cases below damage: one in seven, by correlation id."""
    return e["args"]["correlation"] % 7 == 0


NO_TIME = "rows dropped with no start or end time"

# --- Kineto JSON ---------------------------------------------------------------------------------------------

@case("kineto")
def not_json(tmp: Path) -> Scenario:
    (tmp / "rank0.json").write_text("{ this is not json")
    return detect(tmp / "rank0.json", 2, "invalid JSON")


@case("kineto")
def truncated_json(tmp: Path) -> Scenario:
    path = kineto_copy(tmp)
    path.write_text(path.read_text()[:100_000])
    return detect(path, 2, "the file ends early")


@case("kineto")
def truncated_gzip(tmp: Path) -> Scenario:
    path = tmp / "rank0.json.gz"
    path.write_bytes(KINETO.read_bytes()[:20_000])
    return detect(path, 2, "corrupt gzip (Compressed file ended before the end-of-stream marker was reached)")


@case("kineto")
def corrupt_gzip(tmp: Path) -> Scenario:
    data = bytearray(KINETO.read_bytes())
    data[100:5000] = b"\x00" * 4900
    path = tmp / "rank0.json.gz"
    path.write_bytes(bytes(data))
    return detect(path, 2, "corrupt gzip")


@case("kineto")
def json_array(tmp: Path) -> Scenario:
    (tmp / "rank0.json").write_text("[1, 2, 3]")
    return detect(tmp / "rank0.json", 2, "not a trace traceql can read")


@case("kineto")
def no_trace_events(tmp: Path) -> Scenario:
    (tmp / "rank0.json").write_text('{"schemaVersion": 1}')
    return detect(tmp / "rank0.json", 2, "no traceEvents array")


@case("kineto")
def trace_events_not_a_list(tmp: Path) -> Scenario:
    (tmp / "rank0.json").write_text('{"traceEvents": {"a": 1}}')
    return detect(tmp / "rank0.json", 2, "invalid JSON: expected '['")


@case("kineto")
def nested_too_deeply(tmp: Path) -> Scenario:
    (tmp / "rank0.json").write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    return detect(tmp / "rank0.json", 2, "nested too deeply")


@case("kineto")
def no_gpu_activity(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, lambda e: None if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") else e)
    return detect(path, 3, "no GPU activity")


@case("kineto")
def kernels_without_dur(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {k: v for k, v in e.items() if k != "dur"}))
    return detect(path, 3, "lasts 0 ns")


@case("kineto")
def negative_dur(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "dur": -abs(e["dur"]) if e["ts"] % 3 < 1 else e["dur"]}))
    negative = kineto_kernels(lambda e: e["ts"] % 3 < 1 and e["dur"] != 0)  # under 1 µs included: -0.7 µs is < 0
    return detect(path, 0, f"kernels: {negative:,} rows dropped with an end before its start")


@case("kineto")
def text_timestamps(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "ts": "soon"} if _seventh(e) else e))
    return detect(path, 0, f"kernels: {kineto_kernels(_seventh):,} {NO_TIME}")


@case("kineto")
def huge_timestamps(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "ts": 1e300} if _seventh(e) else e))
    return detect(path, 0, f"kernels: {kineto_kernels(_seventh):,} {NO_TIME}")


@case("kineto")
def huge_durations(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "dur": 10**25} if _seventh(e) else e))
    return detect(path, 0, f"kernels: {kineto_kernels(_seventh):,} {NO_TIME}")


@case("kineto")
def nan_timestamps(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "ts": float("nan")} if _seventh(e) else e))
    return detect(path, 0, f"kernels: {kineto_kernels(_seventh):,} {NO_TIME}")


@case("kineto")
def every_event_twice(tmp: Path) -> Scenario:
    data = kineto_events()
    path = tmp / "rank0.json"
    path.write_text(json.dumps({**data, "traceEvents": data["traceEvents"] * 2}))
    return detect(path, 0, f"kernels: {kineto_kernels():,} exact duplicate rows dropped")


@case("kineto")
def args_not_an_object(tmp: Path) -> Scenario:
    return detect(kineto_copy(tmp, kernels_only(lambda e: {**e, "args": 5})), 0, "", shows=kineto_compute())


@case("kineto")
def grid_not_a_list(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "args": {**e["args"], "grid": "wide"}}))
    return detect(path, 0, "", shows=kineto_compute())


@case("kineto")
def odd_device_and_stream(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "args": {**e["args"], "device": "gpu0", "stream": [1]}}))
    return detect(path, 0, "", shows=kineto_compute())


@case("kineto")
def two_files_one_rank(tmp: Path) -> Scenario:
    (tmp / "run").mkdir()
    a = kineto_copy(tmp / "run", name="a.json")
    b = kineto_copy(tmp / "run", name="b.json")
    return Scenario(["detect", tmp / "run"], 2, "give one trace per rank", b, [a, b])
