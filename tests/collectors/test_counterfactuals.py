"""The counterfactual runs of collect: serialized communication, in every step or in alternate ones, gives stock
DDP's gradients to the bit (two gloo ranks on CPU, the tiny example's model in two buckets), and its options are
checked before launch."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from tests.paths import TINY  # noqa: E402
from traceql.collectors.config import load_input  # noqa: E402
from traceql.collectors.counterfactuals import SerialComm, defer_communication, serial_step  # noqa: E402
from traceql.collectors.driver import load_module  # noqa: E402
from traceql.collectors.errors import CollectError  # noqa: E402

STEPS = 4  # the first step runs on DDP's initial buckets, the later ones on the rebuilt buckets


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(mod, comm: str) -> tuple[list[list[torch.Tensor]], list[torch.Tensor], int]:
    """STEPS optimizer steps of the tiny model; each step's gradients, the final parameters, buckets reduced."""
    model = mod.get_model(dist.get_rank(), 1)
    serial = defer_communication(model, comm)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    grads, reduced, deferred = [], 0, []
    for index, (inputs, _labels) in enumerate(mod.get_dataloader(dist.get_rank(), 8)[:STEPS]):
        if serial is not None:
            serial.deferring = serial_step(comm, index)
        kept = []
        if serial is not None:  # what the hook keeps back until the backward ends
            real = serial._reduce
            serial._reduce = lambda real=real, kept=kept: (kept.append(len(serial.kept)), real())[1]
        mod.backward_pass(mod.forward_pass(model, inputs))
        if serial is not None:
            serial._reduce = real
            deferred.append(max(kept, default=0))
            reduced += serial.flush()
        grads.append([p.grad.detach().clone() for p in model.parameters()])
        opt.step()
        opt.zero_grad(set_to_none=True)
    return grads, [p.detach().clone() for p in model.parameters()], (reduced, deferred)


def _rank(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        mod = load_module(TINY / "define_model.py", "tiny_define_model")
        stock_grads, stock_params, _ = _train(mod, "overlap")
        serial_grads, serial_params, (reduced, deferred) = _train(mod, "serial")
        alt_grads, alt_params, (alt_reduced, alt_deferred) = _train(mod, "alternate")
        local = mod.get_model(rank, 1).module  # the same model, no communication: what a rank computes alone
        inputs = mod.get_dataloader(rank, 8)[0][0]
        mod.backward_pass(mod.forward_pass(local, inputs))
        report = {
            "grads_equal": all(torch.equal(a, b) for s, t in zip(stock_grads, serial_grads, strict=True)
                               for a, b in zip(s, t, strict=True)),
            "params_equal": all(torch.equal(a, b) for a, b in zip(stock_params, serial_params, strict=True)),
            "alt_grads_equal": all(torch.equal(a, b) for s, t in zip(stock_grads, alt_grads, strict=True)
                                   for a, b in zip(s, t, strict=True)),
            "alt_params_equal": all(torch.equal(a, b) for a, b in zip(stock_params, alt_params, strict=True)),
            "differs_from_local": any(not torch.equal(p.grad, g) for p, g in zip(local.parameters(),
                                                                                 stock_grads[0], strict=True)),
            "reduced": reduced, "deferred": deferred, "alt_reduced": alt_reduced, "alt_deferred": alt_deferred,
        }
        Path(out, f"rank{rank}.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


def test_serial_communication_gives_stock_ddp_gradients_to_the_bit(tmp_path: Path) -> None:
    mp.spawn(_rank, args=(_free_port(), str(tmp_path)), nprocs=2, join=True)
    for rank in (0, 1):
        report = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert report["grads_equal"], f"rank {rank}: serialized gradients differ from stock DDP's"
        assert report["params_equal"], f"rank {rank}: parameters differ after {STEPS} steps"
        assert report["differs_from_local"], "the all-reduce changed nothing: the test would not see a skipped one"
        assert report["reduced"] > STEPS, "the tiny model at bucket_cap_mb 1 reduces more than one bucket a step"
        assert report["alt_grads_equal"] and report["alt_params_equal"], f"rank {rank}: alternate differs from stock"
        assert report["alt_reduced"] == report["reduced"], "alternate reduces every bucket once, as serial does"
        kept = report["deferred"]  # a step's buckets (DDP rebuilds them after the first)
        assert sum(kept) == report["reduced"] and min(kept) >= 1, "serial keeps every bucket back to the end"
        assert report["alt_deferred"] == [0, kept[1], 0, kept[3]], "alternate keeps them back in odd steps only"


def test_serial_needs_a_ddp_model() -> None:
    with pytest.raises(RuntimeError, match="not DistributedDataParallel"):
        defer_communication(torch.nn.Linear(2, 2), "serial")
    assert defer_communication(torch.nn.Linear(2, 2), "overlap") is None
    assert SerialComm.flush.__doc__  # the public step the driver calls after each backward


@pytest.mark.parametrize(("overrides", "message"), [
    ({"comm": "fast"}, "comm must be one of overlap, serial, alternate, got \"fast\""),
    ({"comm": "serial", "world_size": 1}, "world_size 1 has none"),
    ({"gpu_delay": {"rank": 2, "steps": [1], "ms": 5}}, "gpu_delay rank must be a rank of the run (0..1)"),
    ({"gpu_delay": {"rank": 0, "steps": [1], "sleep_ms": 5}},
     'gpu_delay must be {"rank": R, "steps": [i, ...], "ms": M}'),
    ({"gpu_delay": {"rank": 0, "steps": [], "ms": 5}}, "gpu_delay steps must be a list of step numbers"),
    ({"gpu_delay": {"rank": 0, "steps": [1], "ms": 0}}, "gpu_delay ms must be a finite number of ms above 0, got 0"),
])
def test_counterfactual_options_are_checked(overrides: dict, message: str) -> None:
    with pytest.raises(CollectError) as err:
        load_input(TINY, overrides)
    assert message in str(err.value)
    assert str(err.value).startswith(str(TINY / "local_config.json"))


def test_gpu_delay_on_cpu_is_refused_before_launch(tmp_path: Path) -> None:
    from traceql.collectors.launch import collect
    from traceql.collectors.launch_options import LaunchOptions
    from traceql.collectors.profilers import ProfilerOptions

    with pytest.raises(CollectError, match="gpu_delay spins a GPU"):
        collect(TINY, ProfilerOptions(), out=tmp_path / "run", launch=LaunchOptions(device="cpu"),
                overrides={"gpu_delay": {"rank": 1, "steps": [2], "ms": 5}})
    assert not (tmp_path / "run").exists()
