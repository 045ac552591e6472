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


SHARED_NSYS = ROOT.parent / "shared" / "datasets" / "h200-ddp" / "nsys"
NAMED = re.compile(r"<!-- output: (traceql .*?) -->")


def fenced(text: str) -> list[tuple[str, str, list[str]]]:
    """The fenced blocks of a page: (their language, the line before the opening fence, their lines)."""
    blocks, inside, lang, before, body, last = [], False, "", "", [], ""
    for line in text.splitlines():
        if line.startswith("```") and not inside:
            inside, lang, before, body = True, line[3:].strip(), last, []
        elif line.startswith("```"):
            inside = False
            blocks.append((lang, before, body))
        elif inside:
            body.append(line)
        last = line
    return blocks


def outputs() -> list[tuple[str, str, list[str]]]:
    """Every output a page shows of a command: a plain or ```text block that opens with ``$ traceql ...``, or
    right after an ``<!-- output: traceql ... -->`` comment; with its page and its lines (``...``: lines left
    out)."""
    out = []
    for page in PAGES:
        for lang, before, lines in fenced(page.read_text()):
            if lang not in ("", "text"):
                continue
            if named := NAMED.fullmatch(before.strip()):
                out.append((page.relative_to(ROOT).as_posix(), named.group(1), lines))
            elif lines and lines[0].startswith("$ traceql "):
                out.append((page.relative_to(ROOT).as_posix(), lines[0][2:], lines[1:]))
    return out


def test_the_pages_show_outputs() -> None:
    assert len(outputs()) >= 8  # the README's and the command pages': every one of them is checked below


@pytest.mark.parametrize(("page", "line", "shown"), outputs(), ids=[f"{p}:{i}" for i, (p, *_) in enumerate(outputs())])
def test_every_output_shown_is_the_command_s(page: str, line: str, shown: list[str], tmp_path: Path) -> None:
    """The command run as the page says, at 80 columns: every line the page shows of its output (stdout and
    stderr), numbers included, is a line it prints, in that order (``...`` stands for lines left out)."""
    (tmp_path / "datasets").symlink_to(ROOT / "datasets")
    args = shlex.split(line)[1:]
    for name in args:  # the shared corpus' exports the diff page compares
        if name.endswith(".sqlite") and "/" not in name:
            if not (SHARED_NSYS / name).is_file():
                pytest.skip(f"{name}: the shared corpus is absent")
            (tmp_path / name).symlink_to(SHARED_NSYS / name)
    done = subprocess.run([sys.executable, "-m", "traceql", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "COLUMNS": "80"})
    printed = [x.rstrip() for x in (done.stderr + done.stdout).splitlines()]
    at = 0
    for want in (x.rstrip() for x in shown):
        if want == "...":
            continue
        assert want in printed[at:], (page, line, want, "\n".join(printed[at:at + 40]))
        at = printed.index(want, at) + 1


def test_the_bucket_table_is_the_shipped_profile_s() -> None:
    """The profile page's table of runs that are not shipped: each row is what the profile they wrote holds."""
    import json

    profile = json.loads((ROOT / "datasets/examples/profiles/gpt2/buckets-nvidia-h200.json").read_text())
    block = next(lines for lang, _, lines in fenced((DOCS / "commands" / "profile.md").read_text())
                 if lines and lines[0].startswith("$ traceql profile buckets"))
    rows = [line.split() for line in block if re.match(r"^ +\d", line)]
    assert len(rows) == len(profile["caps"]) == 3
    for row, cap in zip(rows, profile["caps"], strict=True):
        want = [cap["cap_mb"], cap["buckets"], round(sum(cap["allreduce_ms"]), 3), round(cap["exposed_comm_ms"], 3),
                round(cap["overlap_tax_ms"], 3), round(cap["step_ms"], 3), cap["batch"]]
        assert [float(x) for x in row] == pytest.approx(want, abs=5e-4), (row, want)
    model = profile["comm_model"]
    assert f"all-reduce ≈ {model['latency_ms']} ms + {model['ms_per_mb']} ms/MB ({model['samples']} buckets)" in block
