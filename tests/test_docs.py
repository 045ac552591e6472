"""The README and the docs site: the README short, the site built strictly (no broken link, no page left out),
every option of every command's --help on its page, and every example they give run on shipped data."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer

from tests.paths import ROOT

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
EXAMPLE = re.compile(r"```bash\n(.*?)```", re.S)


def examples() -> list[tuple[str, str, int]]:
    """Every ``traceql ...`` line of a ```bash block of the README and the docs (```console blocks show what
    needs a GPU or your own files: not run), with the page it is on and the exit code it should give: 0, or
    the one its comment names (``# exit 1: a straggler``)."""
    out = []
    for page in PAGES:
        for block in EXAMPLE.findall(page.read_text()):
            for line in block.splitlines():
                if line.strip().startswith("traceql "):
                    code = re.search(r"#\s*exit (\d+)", line)
                    out.append((page.relative_to(ROOT).as_posix(), line.split("  #")[0].split(" # ")[0].strip(),
                                int(code.group(1)) if code else 0))
    return out


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "site" / "commands" / "whatif" / "index.html").is_file()


def _commands() -> list[tuple[str, click.Command]]:
    from traceql.cli import app

    group = typer.main.get_command(app)
    out = []
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        if hasattr(cmd, "commands"):  # a group (typer's own copy of click's)
            out += [(f"{name} {sub}", c) for sub, c in cmd.commands.items()]
        else:
            out.append((name, cmd))
    return out


@pytest.mark.parametrize(("name", "command"), _commands(), ids=[n for n, _ in _commands()])
def test_every_option_is_on_its_command_s_page(name: str, command: click.Command) -> None:
    page = (DOCS / "commands" / f"{name.split()[0]}.md").read_text()
    for param in command.params:
        if isinstance(param, click.Option):
            longest = max(param.opts, key=len)
            if longest in ("--help",):
                continue
            assert f"`{longest}" in page or f"{longest} " in page or f"{longest}`" in page, (name, longest)


@pytest.mark.parametrize(("page", "line", "code"), examples(), ids=[f"{p}:{i}" for i, (p, *_) in enumerate(examples())])
def test_every_example_runs_on_shipped_data(page: str, line: str, code: int, tmp_path: Path) -> None:
    """Each example as a user types it, in a folder of their own (outputs land there), the shipped ``datasets``
    beside it."""
    (tmp_path / "datasets").symlink_to(ROOT / "datasets")
    if "slowdowns/" in line and not line.startswith("traceql dataset add"):  # a dataset an earlier line added
        subprocess.run([sys.executable, "-m", "traceql", "-q", "dataset", "add", "slowdowns/",
                        "datasets/inrun/gpt2-inrun-nsys"], cwd=tmp_path, capture_output=True, check=True)
    args = shlex.split(line)[1:]
    done = subprocess.run([sys.executable, "-m", "traceql", "-q", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == code, (page, line, done.stderr[-1000:])
