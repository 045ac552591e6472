"""The input folder contract: define_model.py, local_config.json, global_config.json, train_script.py.

Everything is checked before anything is launched; define_model.py is parsed, not imported (importing it
may need a GPU).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceql.collectors.errors import CollectError
from traceql.collectors.fields import Field, check, integer, number, one_of, shown

FUNCTIONS = {"get_model": 2, "get_dataloader": 2, "forward_pass": 2, "backward_pass": 1}
MAX_WORLD = 1 << 20  # ranks of one run: past the largest clusters, a typing mistake
LOCAL_KEYS: dict[str, Field] = {"world_size": integer(1, most=MAX_WORLD), "cap_size": number(0, above=True),
                                "epochs": integer(1), "batchsize": integer(1)}
# optional: one rank sleeps at the start of chosen window steps (``step_<i>``), making it the straggler the
# others wait for: {"rank": 1, "steps": [2, 4], "sleep_ms": 40}; with "at": "backward", after the step's
# backward returns instead, while its GPU still runs the work queued (a sleep the GPU may absorb)
STRAGGLER_AT = ("start", "backward")
# optional: micro-batches a step runs before the optimizer steps: accumulation_steps x virtual_workers, of
# batchsize each, DDP's all-reduce on the last only (what `traceql solve` chooses; 1 and 1 by default)
# optional counterfactuals (collectors/counterfactuals.py): "comm": "serial" defers DDP's all-reduces until
# the backward ends ("alternate": in odd steps only); "gpu_delay": {"rank": 1, "steps": [2, 4], "ms": 12}
# spins that rank's GPU at those steps
OPTIONAL_LOCAL_KEYS = ("straggler", "accumulation_steps", "virtual_workers", "comm", "gpu_delay")
COMM = {"comm": one_of("overlap", "serial", "alternate")}
MICRO_BATCHES = {"accumulation_steps": integer(1), "virtual_workers": integer(1)}
GLOBAL_KEYS = ("cuda_visible_devices", "cuda_version_check", "nsys_path", "ncu_path", "python_path")


@dataclass
class InputSpec:
    """A checked input folder."""

    folder: Path
    local: dict[str, Any]
    global_: dict[str, Any] = field(default_factory=dict)
    train_script: Path | None = None

    @property
    def name(self) -> str:
        return self.folder.resolve().name


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CollectError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise CollectError(f"{path}: expected a JSON object")
    return data


def _check_define_model(path: Path) -> None:
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as exc:
        raise CollectError(f"{path}: Python syntax error at line {exc.lineno}: {exc.msg}") from None
    found = {n.name: len(n.args.args) for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name, arity in FUNCTIONS.items():
        if name not in found:
            raise CollectError(f"{path}: no top-level function {name}() "
                               f"(define_model.py must define {', '.join(FUNCTIONS)})")
        if found[name] != arity:
            raise CollectError(f"{path}: {name}() takes {found[name]} argument(s), the contract says {arity}")


def check_local(config: dict[str, Any], where: str) -> dict[str, Any]:
    """Validate local_config values (also used for overrides)."""
    unknown = set(config) - set(LOCAL_KEYS) - set(OPTIONAL_LOCAL_KEYS)
    if unknown:
        raise CollectError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
                           f"allowed: {', '.join((*LOCAL_KEYS, *OPTIONAL_LOCAL_KEYS))}")
    check(config, LOCAL_KEYS, where)
    if "straggler" in config:
        check_straggler(config["straggler"], config["world_size"], where)
    if "gpu_delay" in config:
        check_straggler(config["gpu_delay"], config["world_size"], where, key="gpu_delay", length="ms")
    check(config, COMM, where, optional=True)
    if config.get("comm") in ("serial", "alternate") and config["world_size"] < 2:
        raise CollectError(f"{where}: comm {config['comm']} defers DDP's all-reduces, and world_size 1 has none "
                           "(give world_size 2 or more)")
    check(config, MICRO_BATCHES, where, optional=True)
    return config


def check_straggler(value: Any, world: int, where: str, *, key: str = "straggler", length: str = "sleep_ms",
                    ) -> None:
    """The ``straggler`` option: ``{"rank": R, "steps": [i, ...], "sleep_ms": M}``, R a rank of the run (and
    ``gpu_delay``: ``{"rank": R, "steps": [i, ...], "ms": M}``)."""
    at = ', "at": "start" or "backward"' if key == "straggler" else ""
    shape = f'{key} must be {{"rank": R, "steps": [i, ...], "{length}": M{at}}}'
    if not isinstance(value, dict) or not {"rank", "steps", length} <= set(value) <= {
            "rank", "steps", length, *(("at",) if at else ())}:
        raise CollectError(f"{where}: {shape}, got {json.dumps(value)}")
    if value.get("at", "start") not in STRAGGLER_AT:
        raise CollectError(f"{where}: {key} at must be \"start\" or \"backward\", got {json.dumps(value['at'])}")
    rank, steps, ms = value["rank"], value["steps"], value[length]
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world:
        raise CollectError(f"{where}: {key} rank must be a rank of the run (0..{world - 1}), "
                           f"got {json.dumps(rank)}")
    if not isinstance(steps, list) or not steps or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in steps):
        raise CollectError(f"{where}: {key} steps must be a list of step numbers, got {json.dumps(steps)}")
    if not number(0, above=True).test(ms):
        raise CollectError(f"{where}: {key} {length} must be a finite number of ms above 0, got {shown(ms)}")


def load_input(folder: str | Path, overrides: dict[str, Any] | None = None) -> InputSpec:
    """Read and check an input folder; ``overrides`` replace local_config values (e.g. a sweep's)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CollectError(f"{folder}: no such input folder")
    model = folder / "define_model.py"
    if not model.is_file():
        raise CollectError(f"{folder}: no define_model.py (it must define {', '.join(FUNCTIONS)})")
    _check_define_model(model)
    local_path = folder / "local_config.json"
    if not local_path.is_file():
        raise CollectError(f"{folder}: no local_config.json (keys: {', '.join(LOCAL_KEYS)})")
    local = _read_json(local_path)
    if overrides:
        local = {**local, **overrides}
    check_local(local, str(local_path) + (" with overrides" if overrides else ""))
    global_path = folder / "global_config.json"
    global_ = _read_json(global_path) if global_path.is_file() else {}
    unknown = set(global_) - set(GLOBAL_KEYS)
    if unknown:
        raise CollectError(f"{global_path}: unknown key(s) {', '.join(sorted(unknown))}; "
                           f"allowed: {', '.join(GLOBAL_KEYS)}")
    for key, value in global_.items():
        if value is not None and not isinstance(value, str):
            raise CollectError(f"{global_path}: {key} must be a string or null, got {json.dumps(value)}")
    script = folder / "train_script.py"
    return InputSpec(folder, local, global_, script if script.is_file() else None)
