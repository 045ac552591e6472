"""Sequence-parallel mini-benchmark: all-gather -> matmul -> matmul -> reduce-scatter over the ranks.

Each rank holds ``seq_len / world`` tokens of ``hidden`` features. A step all-gathers the sequence,
multiplies it by W1 (hidden x 4*hidden) and W2 (4*hidden x hidden), and reduce-scatters the result back
into sequence shards: the communication/computation pattern of a sequence-parallel transformer MLP.
Settings are in seqpar_config.json (dtype float32|bfloat16, seq_len, hidden, steps per epoch); epochs and
ranks come from local_config.json. Every phase is timed with CUDA events (wall clock on CPU) and the
per-phase medians are printed and stored in the rank's result file.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import torch
import torch.distributed as dist

from traceql.collectors.driver import script_session

CONFIG = json.loads((Path(__file__).parent / "seqpar_config.json").read_text())
PHASES = ("all_gather", "matmul1", "matmul2", "reduce_scatter")


class Timer:
    """Per-phase time: CUDA events on GPU (read at the end), wall clock on CPU."""

    def __init__(self, cuda: bool) -> None:
        self.cuda, self.marks = cuda, []

    def mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def phases_ms(self) -> list[float]:
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:], strict=False)]
        return [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:], strict=False)]


def main() -> None:
    with script_session(steps_per_epoch=CONFIG["steps_per_epoch"]) as s:
        world, dtype = s.world, getattr(torch, CONFIG["dtype"])
        if CONFIG["seq_len"] % world:
            raise ValueError(f"seq_len {CONFIG['seq_len']} is not divisible by {world} ranks")
        shard, hidden = CONFIG["seq_len"] // world, CONFIG["hidden"]
        gen = torch.Generator(device="cpu").manual_seed(s.rank)
        x = torch.randn(shard, hidden, generator=gen).to(s.device, dtype)
        w1 = (torch.randn(hidden, 4 * hidden, generator=gen) / hidden**0.5).to(s.device, dtype)
        w2 = (torch.randn(4 * hidden, hidden, generator=gen) / (4 * hidden) ** 0.5).to(s.device, dtype)
        full = torch.empty(shard * world, hidden, device=s.device, dtype=dtype)
        out = torch.empty(shard, hidden, device=s.device, dtype=dtype)
        timings: dict[str, list[float]] = {p: [] for p in PHASES}
        for epoch in range(s.args.epochs):
            for step in range(CONFIG["steps_per_epoch"]):
                timer = Timer(s.device.type == "cuda")
                with s.window.step(epoch, step):
                    timer.mark()
                    if world > 1:
                        dist.all_gather_into_tensor(full, x)
                    else:
                        full.copy_(x)
                    timer.mark()
                    h = full @ w1
                    timer.mark()
                    y = h @ w2
                    timer.mark()
                    if world > 1:
                        dist.reduce_scatter_tensor(out, y)
                    else:
                        out.copy_(y[:shard])
                    timer.mark()
                for phase, ms in zip(PHASES, timer.phases_ms(), strict=True):
                    timings[phase].append(ms)
        medians = {p: round(statistics.median(v), 4) for p, v in timings.items()}
        s.result["phases_median_ms"] = medians
        s.result["config"] = CONFIG
        print(f"rank {s.rank}: " + ", ".join(f"{p} {ms:.3f} ms" for p, ms in medians.items()), flush=True)


if __name__ == "__main__":
    main()
