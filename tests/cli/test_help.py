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
