"""The untraced run: the steps outside the capture against those inside it, from what `collect` recorded of
every rank's steps (real runs here), and the note a verdict carries where tracing slowed the run."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from tests.paths import RUNS
from traceql.analyzers.untraced import INFLATION_SAID, Untraced, inflation_note, untraced


def _results(run: Path) -> list[list[dict]]:
    return [json.loads(p.read_text())["step_times_ms"] for p in sorted((run / "results").glob("rank*.json"))]


@pytest.mark.parametrize("name", ["gpt2-pair-nsys", "gpt2-4rank-nsys", "gpt2-pair-torch", "llama-4rank-cap25-nsys"])
def test_a_gpu_bound_run_is_not_slowed_by_its_profiler(name: str) -> None:
    """GPT-2 and the Llama-style model are GPU-bound on H100: traced and untraced steps within a few per cent,
    each the median over steps of the slowest rank's wall time, computed here from the rank results."""
    ranks = _results(RUNS / name)
    found = untraced(ranks)
    assert found is not None
    steps: dict[tuple[bool, int, int], float] = {}
    for times in ranks:
        for t in times:
            if not t.get("isolated"):
                key = (t["window"], t["epoch"], t["step"])
                steps[key] = max(steps.get(key, 0.0), t["ms"])
    inside = [v for k, v in sorted(steps.items()) if k[0]][1:]
    outside = [v for k, v in sorted(steps.items()) if not k[0] and (k[1], k[2]) != (0, 0)]
    assert (found.traced_ms, found.untraced_ms) == (statistics.median(inside), statistics.median(outside))
    assert (found.traced_steps, found.untraced_steps) == (len(inside), len(outside)) and len(outside) >= 2
    assert abs(found.inflation) < INFLATION_SAID and inflation_note(name, found) is None


def test_a_traced_run_slower_than_its_untraced_steps_is_said() -> None:
    note = inflation_note("encdec", Untraced(184.8, 96.1, 5, 9))
    assert note == ("note: encdec: steps took 184.8 ms traced, 96.1 ms untraced (+92%, medians of 5 and 9 steps): "
                    "the profiler slowed the run, and CPU-side figures describe the traced run")
    assert inflation_note("x", Untraced(104.9, 100.0, 5, 9)) is None  # under 5 %: not said


def test_the_warm_up_step_and_the_captures_first_are_left_out() -> None:
    def step(epoch: int, number: int, ms: float, window: bool, **more: bool) -> dict:
        return {"epoch": epoch, "step": number, "ms": ms, "window": window, **more}

    times = [step(0, 0, 500.0, False), step(0, 1, 100.0, False), step(0, 2, 104.0, False), step(1, 0, 102.0, False),
             step(1, 1, 300.0, True), step(1, 2, 150.0, True), step(1, 2, 90.0, True, isolated=True),
             step(1, 3, 160.0, True), step(1, 4, 155.0, True), step(1, 5, 400.0, True), step(1, 6, float("nan"), False)]
    other = [dict(t, ms=t["ms"] + 10) if t["step"] == 3 else t for t in times]  # rank 1 slower at step 3
    found = untraced([times, other], injected={5})  # step 5: a straggler's, not the profiler's
    assert found == Untraced(statistics.median([150.0, 170.0, 155.0]), statistics.median([100.0, 104.0, 102.0]), 3, 3)
    assert untraced([times, other]) == Untraced(statistics.median([150.0, 170.0, 155.0, 400.0]), 102.0, 4, 3)
    assert untraced([times], injected={4, 5}) is None  # two steps left in the window: too few to tell
    assert untraced([[t for t in times if t["window"]]]) is None  # nothing outside the window: no comparison
    assert untraced([]) is None


@pytest.mark.parametrize("command", ["detect", "ranks", "whatif"])
def test_every_verdict_on_a_slowed_run_says_so(invoke, command: str) -> None:
    """ResNet-50 at batch 32 on one H100 is CPU-bound: traced, its steps took 39.1 ms against 23.9 ms outside the
    capture (the rank result's wall times); every command says it in a note. The straggler run's lateness was
    injected into window steps 2 and 4: left out, its other steps are not slowed, and nothing is said."""
    slowed = invoke(command, RUNS / "resnet50-single-nsys")
    assert slowed.exit_code == 0, slowed.stderr
    said = " ".join(slowed.stdout.split())
    assert slowed.stderr == ""
    assert ("note: resnet50-single-nsys: steps took 39.1 ms traced, 23.9 ms untraced (+64%, medians of 4 and 10 "
            "steps): the profiler slowed the run, and CPU-side figures describe the traced run") in said
    late = invoke(command, RUNS / "gpt2-straggler-nsys")
    assert late.exit_code == 0 and "profiler slowed" not in late.stderr and "profiler slowed" not in late.stdout


LIBRARY = Path(__file__).resolve().parents[2] / "datasets" / "library" / "h100-f"


def test_launch_bound_library_models_are_slowed_by_tracing_and_the_notes_say_it() -> None:
    """Library models on 2 x H100 (datasets/library): BART in bf16 ran every stock and serialized step 15-69 %
    longer traced than untraced, so each of its runs gets the note; EfficientNet-B0 on one GPU, GPU-bound there,
    within 1 % (no note). Each side holds the window's 5 steps and 9 untraced ones."""
    runs = {p.name: untraced(_results(p)) for p in sorted(LIBRARY.iterdir())}
    assert len(runs) == 25 and all(u is not None and (u.traced_steps, u.untraced_steps) == (5, 9)
                                   for u in runs.values())
    bart = [name for name in runs if name.startswith("bart-2g")]
    assert len(bart) == 6 and all(runs[n].inflation > 0.14 and inflation_note(n, runs[n]) for n in bart)
    twin = runs["efficientnet-twin"]
    assert twin is not None and abs(twin.inflation) < 0.02 and inflation_note("efficientnet-twin", twin) is None
