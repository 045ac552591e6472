"""The package a user installs: an sdist built from the checkout, a wheel built from that sdist, installed into
a fresh virtual environment and run from an empty folder — the embedded example labelled as the checkout
labels it, and nothing installed under a name other than ``traceql``.

The fresh environment gets the dependencies by a path to this environment's site-packages (a ``.pth`` line,
which Python does not scan for further ``.pth`` files, so this checkout's editable install stays out): what
is tested is the wheel, not a second download of duckdb and polars.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.paths import ROOT

EMBEDDED_CASES = 343  # `traceql detect` on the embedded example (the README's first command)


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)}: {done.stderr[-2000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    build = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
    sdist = dist / _run([sys.executable, "-c", build, str(dist)], ROOT).stdout.strip().splitlines()[-1]
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
          str(sdist)], dist)
    return next(dist.glob("traceql-*.whl"))


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed: its folder."""
    env = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     env).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)], env)
    return env


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def test_the_wheel_holds_traceql_alone_with_the_embedded_example(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"traceql", wheel.name.split("-py")[0] + ".dist-info"}
    for part in ("traceql/analyzers/overlap.py", "traceql/collectors/driver.py",
                 "traceql/collectors/_child/traceql/__init__.py",
                 "traceql/datasets/default/gpt2-nsys/manifest.json",
                 "traceql/datasets/default/gpt2-single-nsys/traces/gpt2-single-nsys_rank0.sqlite"):
        assert part in names


def test_an_installed_traceql_labels_the_embedded_example_from_anywhere(installed: Path, tmp_path: Path) -> None:
    done = _run([str(installed / "bin" / "traceql"), "--quiet", "detect", "--format", "json"], tmp_path,
                env=_clean_env())
    assert json.loads(done.stdout)["totals"]["cases"] == EMBEDDED_CASES
    where = _run([str(installed / "bin" / "python"), "-c",
                  "import traceql, traceql.analyzers.overlap as o; print(traceql.__file__); print(o.__file__)"],
                 tmp_path, env=_clean_env()).stdout.split()
    assert all(p.startswith(str(installed)) for p in where)
    gone = subprocess.run([str(installed / "bin" / "python"), "-c", "import analyzers"], cwd=tmp_path,
                          env=_clean_env(), capture_output=True, check=False)
    assert gone.returncode == 1 and b"No module named 'analyzers'" in gone.stderr  # no generic top-level package


@pytest.mark.parametrize("layout", ["installed", "checkout"])
def test_a_child_process_sees_the_collectors_alone(layout: str, request: pytest.FixtureRequest,
                                                   tmp_path: Path) -> None:
    """What the model's Python (torch alone, maybe) imports through the collectors' stub package."""
    if layout == "installed":
        env = request.getfixturevalue("installed")
        site = _run([str(env / "bin" / "python"), "-c", "import traceql; print(traceql.__file__)"], tmp_path,
                    env=_clean_env()).stdout.strip()
        child = Path(site).parent / "collectors" / "_child"
    else:
        from traceql.collectors.launch import CHILD_PATH

        child = Path(CHILD_PATH)
    code = ("import sys, traceql, traceql.collectors.manifest as s; print(s.__file__); "
            "print(sorted(m for m in sys.modules if m.startswith('traceql')))")
    out = _run([sys.executable, "-S", "-c", code], tmp_path, env={"PYTHONPATH": str(child)}).stdout.splitlines()
    assert Path(out[0]).resolve().parent == child.resolve().parent
    assert "traceql.model" not in out[1] and "traceql.analyzers" not in out[1]
