"""How a collection's ranks are started (torchrun on this node, or ranks that mpirun/srun started), checked
when made: every option names itself in the one error line."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from traceql.collectors.errors import CollectError
from traceql.collectors.session import RANK_ENV, rank_names

LAUNCHERS = ("torchrun", "env")
DEVICES = ("auto", "cuda", "cpu")


@dataclass
class LaunchOptions:
    """How ranks are started: this node's share of ranks, torchrun's rendezvous, or ranks from mpirun/srun."""

    launcher: str = "torchrun"  # or "env": this process is one rank (mpirun/srun started it)
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    rdzv_id: str = "traceql"
    rdzv_backend: str = "c10d"
    device: str = "auto"
    timeout: float | None = None
    profile_ranks: list[int] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.launcher not in LAUNCHERS:
            raise CollectError(f"--launcher {self.launcher!r}: one of {', '.join(LAUNCHERS)}")
        if self.device not in DEVICES:
            raise CollectError(f"--device {self.device!r}: one of {', '.join(DEVICES)}")
        if self.timeout is not None and (isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float))
                                         or not 0 < self.timeout < math.inf):
            raise CollectError(f"--timeout must be a finite number of seconds above 0, got {self.timeout!r}")
        if self.rdzv_endpoint is not None and not _endpoint(self.rdzv_endpoint):
            raise CollectError(f"--rdzv-endpoint {self.rdzv_endpoint!r}: give HOST:PORT, a port from 1 to 65535 "
                               "(e.g. node0:29500)")
        if not 1 <= self.nnodes or not 0 <= self.node_rank < self.nnodes:
            raise CollectError(f"--nnodes {self.nnodes}, --node-rank {self.node_rank}: at least 1 node, and a "
                               "node rank from 0 to nnodes - 1")


def _endpoint(text: str) -> bool:
    """Whether ``text`` is HOST:PORT (an IPv6 host in brackets), the port a number from 1 to 65535."""
    host, sep, port = text.strip().rpartition(":")
    return bool(sep and host.strip("[]") and port.isdigit() and 1 <= int(port) <= 65535)


def _env_int(name: str, default: str, least: int, what: str) -> int:
    """The launcher's variable ``name`` (``default`` when unset) as an integer of at least ``least``."""
    text = os.environ.get(name, default)
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise CollectError(f"--launcher env: {name}={text!r} in the launcher's environment: {what} must be an "
                           f"integer of at least {least}")
    return value


def check_env_ranks(world: int) -> None:
    """Under ``--launcher env``: the rank, world size and local rank mpirun/srun set (``RANK_ENV``) are
    numbers, the world size is the run's ``world_size`` and the rank one of its ranks; checked before anything
    is made or launched."""
    names = rank_names()
    if names is None:
        if world != 1:
            raise CollectError(f"--launcher env: no rank in the environment (none of "
                               f"{', '.join(n[0] for n in RANK_ENV)} is set), and world_size is {world}: start "
                               "each rank with mpirun or srun, or use --launcher torchrun")
        return
    rank_var, world_var, local_var = names
    rank = _env_int(rank_var, "", 0, "a rank")
    started = _env_int(world_var, "1", 1, "the number of ranks started")
    _env_int(local_var, "0", 0, "a local rank")
    if started != world:
        raise CollectError(f"--launcher env: {world_var}={started} in the launcher's environment, and "
                           f"local_config.json world_size is {world}: start as many ranks as world_size")
    if rank >= world:
        raise CollectError(f"--launcher env: {rank_var}={rank} in the launcher's environment is not a rank of "
                           f"the run (0..{world - 1}, world_size {world})")
