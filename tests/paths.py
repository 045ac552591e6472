"""Where the test data is: the embedded traces of ``datasets/`` and the shared corpus in ../shared.

Tests that read the shared corpus carry the ``corpus`` marker (or a :func:`corpus` parameter); they are
skipped when it is absent, so the core suite runs from the project alone (``.ci/run`` refuses that under
``CI=true``). The corpus is ``TRACEQL_SHARED`` if set, else ``shared/`` beside the checkout, else beside the
checkout a local clone was made from (a clean clone in a scratch folder still finds it).
"""

from __future__ import annotations

import configparser
import hashlib
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EMBEDDED = ROOT / "datasets" / "default"
# the embedded default: GPT-2 DDP on 2 × H200 (one nsys per rank) and its single-GPU isolated run
DDP_TRACE = EMBEDDED / "gpt2-nsys"
SINGLE_TRACE = EMBEDDED / "gpt2-single-nsys"
DDP_FILES = sorted((DDP_TRACE / "traces").glob("*.sqlite"))
DDP_FILE = DDP_FILES[0]  # rank 0's export
SINGLE_FILE = next((SINGLE_TRACE / "traces").glob("*.sqlite"))
RUNS = ROOT / "datasets" / "runs"
# the in-run collection: GPT-2 DDP on 2 x H200 with 3 isolated steps, and its isolated run (same session)
INRUN_TRACE = ROOT / "datasets" / "inrun" / "gpt2-inrun-nsys"
INRUN_SINGLE = ROOT / "datasets" / "inrun" / "gpt2-single-nsys"
TINY = ROOT / "datasets" / "examples" / "tiny"


def _shared_root() -> Path:
    """The shared corpus' folder (``datasets/`` inside it), as the module's docstring says."""
    if os.environ.get("TRACEQL_SHARED"):
        return Path(os.environ["TRACEQL_SHARED"])
    beside = ROOT.parent / "shared"
    config = configparser.ConfigParser(strict=False)
    try:
        config.read(ROOT / ".git" / "config")
        origin = Path(config.get('remote "origin"', "url", fallback=""))
    except (configparser.Error, OSError):
        return beside
    if beside.is_dir() or not origin.is_absolute() or not (origin.parent / "shared").is_dir():
        return beside
    return origin.parent / "shared"


SHARED = _shared_root() / "datasets"
H200 = SHARED / "h200-ddp"
NSYS = H200 / "nsys"
KINETO_TOY = H200 / "kineto" / "toy_ddp2_cap25"  # the toy DDP run under torch.profiler, 2 ranks
PUBLIC = SHARED / "public"
HAVE_CORPUS = SHARED.is_dir()


def corpus(*values: object, id: str | None = None) -> object:  # noqa: A002 - pytest's own name
    """A parameter set of the shared corpus: skipped, like a ``corpus`` test, when ../shared is absent."""
    return pytest.param(*values, marks=pytest.mark.corpus, id=id)


def shared_sqlite_files() -> list[Path]:
    """Every nsys export of the shared corpus (none when it is absent)."""
    return sorted(SHARED.rglob("*.sqlite")) if HAVE_CORPUS else []


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
