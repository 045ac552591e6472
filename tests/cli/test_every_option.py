"""Every option of every command's --help is exercised by a test that asserts its effect.

The guard walks the command tree of the app and asks, for each (command, option) pair, that some test source
file of tests/ names both the command (every word of its path as a string literal: "dataset" and "add") and
the option ("--top", or a string literal of a command line that holds it). The files of the bad-input corpus
(tests/bad_inputs/, tests/cli/test_bad_input.py) do not count: they only check that bad values are refused.
test_option_effects.py and test_option_effects_more.py cover the options that no other test exercised, each
against an independent oracle (sqlite3 over the trace, tests/oracle.py) or by comparing the output with and
without the option."""

from __future__ import annotations

import ast
from pathlib import Path

import typer

TESTS = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve()
REFUSALS_ONLY = (TESTS / "bad_inputs", TESTS / "cli" / "test_bad_input.py")

# The options no test can run on this machine, and why. Keep it to those (none today: the nsys and ncu options,
# which collect refuses without a GPU, are checked on the command line they make, test_collect_options.py).
EXEMPT: dict[tuple[tuple[str, ...], str], str] = {}
GUARD = {"EXEMPT", "options", "literals", "missing", "test_every_option_is_exercised",
         "test_the_guard_can_fail"}  # not evidence of a test


def options() -> dict[tuple[tuple[str, ...], str], tuple[str, ...]]:
    """``(command path, first long name) → every long name`` of each option of the app, --help aside."""
    from traceql.cli import app

    out: dict[tuple[tuple[str, ...], str], tuple[str, ...]] = {}

    def walk(command: object, path: tuple[str, ...]) -> None:
        for param in getattr(command, "params", []):
            if getattr(param, "param_type_name", "") != "option":
                continue
            names = tuple(n for n in (*param.opts, *param.secondary_opts) if n.startswith("--"))
            if names and "--help" not in names:
                out[(path, names[0])] = names
        for name, sub in getattr(command, "commands", {}).items():  # typer's own copy of click's groups
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return out


def literals(path: Path) -> set[str]:
    """The string literals of a Python file, each also cut into its words (and ``--opt=value`` into ``--opt``):
    a command line written as one string counts too. Of this file, the guard's own names and its docstring are
    left out."""
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes: list[ast.AST] = [tree]
    if path.resolve() == HERE:
        def guard(node: ast.stmt) -> bool:
            names = {node.name} if isinstance(node, ast.FunctionDef) else {
                t.id for t in getattr(node, "targets", [getattr(node, "target", None)]) if isinstance(t, ast.Name)}
            return bool(names & GUARD)
        nodes = [n for n in tree.body[1:] if not guard(n)]
    out: set[str] = set()
    for node in (n for top in nodes for n in ast.walk(top)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.add(node.value)
            for word in node.value.split():
                out.update((word, word.split("=", 1)[0]))
    return out


def missing(sources: dict[Path, set[str]]) -> list[str]:
    """``command option`` of each option, EXEMPT aside, that no file of ``sources`` (its literals) exercises."""
    return [f"{' '.join(path) or '(root)'} {first}" for (path, first), names in sorted(options().items())
            if (path, first) not in EXEMPT
            and not any(set(path) <= words and any(n in words for n in names) for words in sources.values())]


def test_every_option_is_exercised() -> None:
    sources = {p: literals(p) for p in sorted(TESTS.rglob("*.py"))
               if not any(p == r or r in p.parents for r in REFUSALS_ONLY)}
    found = options()
    assert len(found) > 80 and ((), "--quiet") in found and (("profile", "compute"), "--batches") in found
    left = missing(sources)
    assert not left, "options no test exercises (command, option):\n  " + "\n  ".join(left)
    stale = [key for key in EXEMPT if key not in found]
    assert not stale, f"EXEMPT names options the app no longer has: {stale}"


def test_the_guard_can_fail(tmp_path: Path) -> None:
    """With no test file every option but the exempt ones is missing; a file whose literals hold a command and
    an option (as arguments, or in one command line, ``--opt=value`` too) covers those pairs, no other."""
    every = missing({})
    assert len(every) == len(options()) - len(EXEMPT)
    test = tmp_path / "test_x.py"
    test.write_text('def test_x(invoke):\n    invoke("info", "--top", "3")\n'
                    '    run("traceql dataset add d x --model=m")\n')
    left = missing({test: literals(test)})
    assert sorted(set(every) - set(left)) == ["dataset add --model", "info --top"]
