"""Nothing a reading command prints is ever cut, wider than the terminal or padded with trailing spaces: every
reading command at 80 and 100 columns on the embedded example, the shipped runs and the public traces (their
notes folded too, as on a terminal)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.paths import DDP_FILE, PUBLIC, RUNS, SINGLE_TRACE, corpus

INPUTS = [
    pytest.param(None, id="embedded"),
    pytest.param(SINGLE_TRACE, id="single-gpu"),
    pytest.param(DDP_FILE, id="one-rank-file"),
    *(pytest.param(RUNS / name, id=name) for name in (
        "gpt2-4rank-straggler-nsys", "gpt2-straggler-torch", "gpt2-cap2-inrun-nsys", "resnet50-inrun-nsys",
        "seqpar-nsys")),
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
