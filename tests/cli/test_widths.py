"""Nothing a reading command prints is ever cut, wider than the terminal or padded with trailing spaces: every
reading command at 80 and 100 columns on the embedded example, the shipped runs and the public traces (their
notes folded too, as on a terminal)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.paths import DDP_FILE, DDP_TRACE, INRUN_TRACE, PUBLIC, ROOT, RUNS, SINGLE_TRACE, corpus

INPUTS = [
    pytest.param(None, id="embedded"),
    pytest.param(SINGLE_TRACE, id="single-gpu"),
    pytest.param(DDP_FILE, id="one-rank-file"),
    *(pytest.param(RUNS / name, id=name) for name in (
        "gpt2-4rank-nsys", "gpt2-4rank-straggler-nsys", "gpt2-b16-cap25-nsys", "gpt2-cap2-inrun-nsys",
        "gpt2-straggler-nsys", "gpt2-straggler-torch", "gpt2-torch", "resnet50-inrun-nsys", "resnet50-single-nsys",
        "seqpar-nsys", "gpt2-fsdp2-straggler-nsys", "block-tp-nsys")),
    pytest.param(INRUN_TRACE, id="inrun"),
    *(corpus(PUBLIC / name, id=name.replace("/", "-")) for name in (
        "hta-kineto/trace_filter", "hta-kineto/trace_diff/test", "hta-kineto/ns_resolution_trace",
        "nsysai-h100/h100_2gpu_1s.sqlite", "nsysai-h100/mfu_2gpu_after.sqlite", "nvfuser-h100/report1.sqlite",
        "pipit-perlmutter/perlmutter-cloverleaf-cuda.sqlite", "tracelens-mi300")),
]
COMMANDS = [["info"], ["detect"], ["ranks"], ["whatif"], ["query", "SELECT * FROM kernels LIMIT 3"]]


def faults(text: str, width: int) -> list[str]:
    """The lines of ``text`` that are too wide, cut (``…``) or end in a space."""
    return [line for line in text.splitlines() if len(line) > width or "…" in line or line.endswith(" ")]


@pytest.mark.parametrize("trace", INPUTS)
def test_nothing_is_cut_too_wide_or_padded(invoke, width: int, monkeypatch: pytest.MonkeyPatch,
                                           trace: Path | None) -> None:
    monkeypatch.setenv("COLUMNS", str(width))  # notes fold as on a terminal of that width
    for command in COMMANDS:
        args = [command[0], *([trace] if trace is not None else []), *command[1:]]
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.stderr)
        assert faults(result.stdout, width) == [], (args, width)
        assert faults(result.stderr, width) == [], (args, width)


OTHERS = [
    ["diff", DDP_TRACE, RUNS / "gpt2-cap2-inrun-nsys"],
    ["diff", RUNS / "gpt2-straggler-nsys", RUNS / "gpt2-straggler-torch"],
    ["solve", ROOT / "datasets/examples/profiles/gpt2", "--global-batch", "64", "--cluster",
     ROOT / "datasets/examples/clusters/h200-h100.json"],
    ["info", RUNS / "gpt2-ncu"],
    ["query", RUNS / "gpt2-ncu", "SELECT * FROM kernel_metrics LIMIT 3"],
]


@pytest.mark.parametrize("args", OTHERS, ids=lambda a: " ".join(str(x).split("/")[-1] for x in a[:3]))
def test_the_other_reading_commands_fit_too(invoke, width: int, monkeypatch: pytest.MonkeyPatch, args: list,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    result = invoke(*args)
    assert result.exit_code == 0, (args, result.stderr)
    assert faults(result.stdout, width) == [] and faults(result.stderr, width) == [], args
    root = tmp_path / "ds"
    assert invoke("dataset", "add", root, INRUN_TRACE).exit_code == 0
    summary = invoke("dataset", "summary", root)
    assert summary.exit_code == 0 and faults(summary.stdout, width) == []
