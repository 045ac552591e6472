"""--help as a newcomer reads it: plain placeholders (FILE, N, PCT ...), never a Python type; every input
format named; an example under every command; query's list of relations the model's."""

from __future__ import annotations

import re

import pytest
import typer

from traceql.model import schema


def _commands() -> list[list[str]]:
    from traceql.cli import app

    group = typer.main.get_command(app)
    out = []
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        if hasattr(cmd, "commands"):  # a group (typer's own copy of click's)
            out += [[name, sub] for sub in cmd.commands]
        else:
            out.append([name])
    return out


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_help_has_plain_placeholders_and_an_example(invoke, narrow: int, command: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    assert not re.search(r"<(bool|int|float|str|path|list\[|int range|float range)", result.stdout), result.stdout
    assert "Example" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


@pytest.mark.parametrize("command", ["info", "detect", "ranks", "whatif", "report"])
def test_every_input_format_is_named(invoke, narrow: int, command: str) -> None:
    text = " ".join(invoke(command, "--help").stdout.split())
    for name in ("Nsight Systems SQLite exports", "torch.profiler JSON", "Nsight Compute CSVs", "run folders"):
        assert name in text.replace("│", " ").replace("  ", " ") or name in " ".join(text.replace("│", " ").split())


def test_query_names_every_relation(invoke, narrow: int) -> None:
    text = " ".join(invoke("query", "--help").stdout.replace("│", " ").split())
    assert all(name in text for name in schema.RELATIONS), text


@pytest.mark.parametrize("command", [[], ["export"], ["dataset"], ["profile"]], ids=lambda c: " ".join(c) or "-")
def test_a_bare_group_prints_its_help_once(command: list[str]) -> None:
    """``traceql`` (or a group such as ``traceql export``) with nothing after it: its help, once, and exit 0."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "traceql", *command], capture_output=True, text=True,
                         env={**__import__("os").environ, "COLUMNS": "80"}, timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout.count("Usage:") == 1, out.stdout


def test_global_flags_after_the_command(invoke, narrow: int, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``-q``, ``--wide``, ``--no-cache`` and ``--steps-from REGEX`` after the command's name and its options, as
    before it: the same run (``detect X --out c.parquet -q`` was "No such option: -q"); after ``--`` they are
    the command's arguments."""
    from traceql.cli import common

    seen = []
    real = common.configure
    monkeypatch.setattr(common, "configure", lambda **kw: (seen.append(kw), real(**kw))[1])
    out = tmp_path / "c.parquet"
    result = invoke("detect", "--out", out, "-q")
    assert result.exit_code == 0 and out.is_file(), result.stderr
    assert invoke("ranks", "--steps", "2", "--wide").exit_code == 0
    assert invoke("info", "--steps-from", "^step_([0-9]+)$").exit_code == 0  # a valued one, with its value
    assert invoke("info", "--no-cache").exit_code == 0
    assert seen == [{"wide": False, "quiet": True, "steps_from": None, "no_cache": False},
                    {"wide": True, "quiet": False, "steps_from": None, "no_cache": False},
                    {"wide": False, "quiet": False, "steps_from": "^step_([0-9]+)$", "no_cache": False},
                    {"wide": False, "quiet": False, "steps_from": None, "no_cache": True}]
    after = invoke("info", "--", "-q")
    assert after.exit_code != 0 and "-q" in after.stderr, after.stderr
