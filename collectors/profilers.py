"""Profiler settings, where their binaries are, and the command that wraps one rank's process."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from traceql.collectors.errors import CollectError
from traceql.collectors.files import atomic_path

PROFILERS = ("none", "nsys", "ncu", "torch")
ISOLATED_DEFAULT = 1


@dataclass
class ProfilerOptions:
    """Everything a collection's profiler needs; the defaults are the ones the README documents."""

    name: str = "none"
    steps: int = 5
    isolated_steps: int | None = None  # None: ISOLATED_DEFAULT for profiled multi-rank runs, else 0
    nsys_trace: str = "cuda,nvtx"
    nsys_args: str = "-s none --cpuctxsw none"
    ncu_kernel: str | None = None
    ncu_launch_skip: int = 0
    ncu_launch_count: int = 50
    ncu_pages: tuple[str, ...] = ("raw", "details")
    ncu_args: str = ""
    torch_wait: int = 1
    torch_warmup: int = 1
    torch_active: int = 3
    torch_repeat: int = 1
    torch_skip_first: int = 0

    def __post_init__(self) -> None:
        if self.name not in PROFILERS:
            raise CollectError(f"unknown profiler {self.name!r}; choose one of {', '.join(PROFILERS)}")
        if self.steps < 1:
            raise CollectError(f"--steps must be at least 1, got {self.steps}")
        if self.isolated_steps is not None and self.isolated_steps < 0:
            raise CollectError(f"--isolated-steps must be 0 or more, got {self.isolated_steps}")
        for option, value, least in (("--torch-wait", self.torch_wait, 0), ("--torch-warmup", self.torch_warmup, 0),
                                     ("--torch-active", self.torch_active, 1), ("--torch-repeat", self.torch_repeat, 0),
                                     ("--torch-skip-first", self.torch_skip_first, 0),
                                     ("--ncu-launch-skip", self.ncu_launch_skip, 0),
                                     ("--ncu-launch-count", self.ncu_launch_count, 1)):
            if value < least:
                raise CollectError(f"{option} must be {least} or more, got {value}")

    def isolated_for(self, world_size: int) -> int:
        """Isolated steps to run: as asked, else ISOLATED_DEFAULT when a timeline profiler records several
        ranks (the in-run reference that labels them), else none."""
        if self.isolated_steps is not None:
            return self.isolated_steps
        return ISOLATED_DEFAULT if self.name in ("nsys", "torch") and world_size > 1 else 0

    def isolated_slots(self) -> int:
        """How many window steps an isolated step can precede (see ``traceql.collectors.window``)."""
        return min(self.torch_active, self.window_steps) if self.name == "torch" else self.steps - 1

    @property
    def window_steps(self) -> int:
        """Training steps the profiled window spans."""
        if self.name == "torch":
            cycle = self.torch_wait + self.torch_warmup + self.torch_active
            return self.torch_skip_first + cycle * max(self.torch_repeat, 1)
        return self.steps

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ncu_pages"] = list(self.ncu_pages)
        return d


def find_binary(tool: str, configured: str | None) -> Path:
    """The profiler binary: global_config's ``<tool>_path`` if set, else the PATH; CollectError if absent."""
    if configured:
        p = Path(configured)
        if p.is_file() and os.access(p, os.X_OK):
            return p
        raise CollectError(f"{tool} not found at {configured} (global_config.json {tool}_path): "
                           "point it to the executable or remove the key to use the PATH", stage="environment")
    found = shutil.which(tool)
    if found:
        return Path(found)
    raise CollectError(f"{tool} not found on PATH ({os.environ.get('PATH', '')}): install it or set {tool}_path "
                       "in the input folder's global_config.json", stage="environment")


def tool_version(binary: Path) -> str:
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown"


def wrap_command(opts: ProfilerOptions, binary: Path | None, base: Path, command: list[str]) -> list[str]:
    """The command that runs ``command`` (one rank's driver) under the profiler, writing to ``base``.*"""
    if opts.name == "nsys":
        return [str(binary), "profile", "-t", opts.nsys_trace, *shlex.split(opts.nsys_args),
                "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "--force-overwrite=true",
                "-o", str(base), *command]
    if opts.name == "ncu":
        filt = ["-k", f"regex:{opts.ncu_kernel}"] if opts.ncu_kernel else []
        return [str(binary), "--clock-control", "none", "--profile-from-start", "off",
                "--launch-skip", str(opts.ncu_launch_skip), "--launch-count", str(opts.ncu_launch_count), *filt,
                *shlex.split(opts.ncu_args), "--force-overwrite", "--export", str(base), *command]
    return command


def _import_page(binary: Path | None, rep: Path, page: str, dst: Path) -> None:
    """``ncu --import REP --csv --page PAGE`` into ``dst``, through a temp file."""
    with atomic_path(dst) as tmp:
        with tmp.open("w") as fh:
            res = subprocess.run([str(binary), "--import", str(rep), "--csv", "--page", page], stdout=fh,
                                 stderr=subprocess.PIPE, text=True, timeout=1800)
        if res.returncode != 0:
            raise CollectError(f"ncu --import of {rep.name} (page {page}) failed: {res.stderr.strip()[-300:]}",
                               stage="run")


def postprocess(opts: ProfilerOptions, binary: Path | None, base: Path) -> list[Path]:
    """Turn a rank's raw profiler output into files traceql reads; returns them (empty when none)."""
    if opts.name == "nsys":
        rep = base.with_name(base.name + ".nsys-rep")
        if not rep.exists():
            return []
        out = base.with_name(base.name + ".sqlite")
        with atomic_path(out) as tmp:
            export = [str(binary), "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(tmp)]
            # NVTX payloads (NCCL's message sizes) as blobs, where this nsys can (2024.2 and later)
            res = subprocess.run([*export, "--include-blobs=true", str(rep)], capture_output=True, text=True,
                                 timeout=1800)
            if res.returncode != 0 and "include-blobs" in res.stderr:
                res = subprocess.run([*export, str(rep)], capture_output=True, text=True, timeout=1800)
            if res.returncode != 0 or not tmp.exists():
                raise CollectError(f"nsys export of {rep.name} failed: {res.stderr.strip()[-300:]}", stage="run")
        return [out, rep]
    if opts.name == "ncu":
        rep = base.with_name(base.name + ".ncu-rep")
        if not rep.exists():
            return []
        outs = [rep]
        for page in opts.ncu_pages:
            csv = base.with_name(f"{base.name}_{page}.csv")
            _import_page(binary, rep, page, csv)
            outs.insert(0, csv)
        return outs
    return []
