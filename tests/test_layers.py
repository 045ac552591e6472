"""The rooms of the code and what may import each, as docs/design.md's table says: every module is in the room
of the longest path the table lists that holds it; an import of another room's module must come from a path
the room's last column lists; no command imports another command; no chain of imports comes back to where it
started. Every import is read from the source: at a file's top, inside a function, or a module named as a
string (what ``importlib`` loads)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

PACKAGES = ("traceql", "analyzers", "collectors")  # the repository's folders; installed, all inside traceql
DESIGN = ROOT / "docs" / "design.md"
TABLE_HEAD = "| room | what lives there | imported by |"
MAX_INIT_LINES = 40  # of code in an __init__.py, besides its docstring and imports (the facade aside)


def rooms() -> dict[str, tuple[str, ...]]:
    """docs/design.md's table: each room's path -> the paths that may import it."""
    lines = DESIGN.read_text().splitlines()
    start = lines.index(TABLE_HEAD) + 2
    out: dict[str, tuple[str, ...]] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        importers = tuple(re.findall(r"`([^`]+)`", cells[-1]))
        for path in re.findall(r"`([^`]+)`", cells[0]):
            out[path] = importers
    return out


def repo_path(module: str) -> str:
    """A module's file in the repository (``traceql.analyzers.x`` -> ``analyzers/x.py``)."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("analyzers", "collectors"):
        parts = parts[1:]
    base = "/".join(parts)
    return f"{base}/__init__.py" if (ROOT / base).is_dir() else f"{base}.py"


def module_name(path: Path) -> str:
    """A file's module as installed: the leaves' folders sit inside traceql (setup.py)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(parts if parts[0] == "traceql" else ("traceql", *parts))


def imports(path: Path, modules: set[str]) -> set[str]:
    """Every module of ours ``path`` imports: ``import a.b``; ``from a import b`` as ``a.b`` where that is a
    module, else as ``a``; a string that names a module (``importlib.import_module``'s argument)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                raise AssertionError(f"{path}: a relative import ({node.module}): name the module in full")
            subs = [f"{node.module}.{a.name}" for a in node.names]
            found.update(s for s in subs if s in modules)
            if any(s not in modules for s in subs):
                found.add(node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value:
            if node.value in modules:
                found.add(node.value)
    return {m for m in found if m in modules}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}
    return {name: imports(path, set(files)) - {name} for name, path in files.items()}


def held(path: str, room: str) -> bool:
    """Whether the file ``path`` is ``room`` or lies in it (a folder's path ends in ``/``)."""
    return path == room or (room.endswith("/") and path.startswith(room))


def room_of(module: str, table: dict[str, tuple[str, ...]]) -> str | None:
    """The room of ``module``: the longest path of ``table`` that holds its file."""
    return max((r for r in table if held(repo_path(module), r)), key=len, default=None)


def command(module: str) -> str | None:
    """The command a module of ``traceql.commands`` is (None for any other module, and for the package)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "commands" else None


def violations(graph: dict[str, set[str]], table: dict[str, tuple[str, ...]]) -> list[str]:
    """Each import that the table does not allow, as ``importer -> imported: why``."""
    out = []
    for src, targets in sorted(graph.items()):
        mine = room_of(src, table)
        if mine is None:
            out.append(f"{src}: in no room of docs/design.md")
            continue
        for dst in sorted(targets):
            theirs = room_of(dst, table)
            if command(src) is not None and command(dst) not in (None, command(src)):
                out.append(f"{src} -> {dst}: a command imports another command")
            elif theirs is None or theirs == mine:
                continue
            elif not any(held(repo_path(src), p) for p in table[theirs]):
                out.append(f"{src} -> {dst}: {theirs} is imported by {', '.join(table[theirs]) or 'nothing'}")
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, around (strongly connected, more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_room_of_the_table_is_there_and_every_module_in_one() -> None:
    table = rooms()
    assert len(table) > 20
    missing = [r for r in table if not (ROOT / r).exists()]
    assert missing == []
    importers = {p for paths in table.values() for p in paths}
    assert [p for p in importers if not (ROOT / p).exists()] == []
    graph = import_graph()
    assert len(graph) > 150 and sum(map(len, graph.values())) > 500
    assert [m for m in graph if room_of(m, table) is None] == []


def test_imports_are_those_the_table_allows() -> None:
    assert violations(import_graph(), rooms()) == []


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


LAZY = '''
def f():
    from traceql.commands.ranks import ranks
'''


@pytest.mark.parametrize("importer,imported", [
    ("traceql.analyzers.overlap", "traceql.model.names"),  # a leaf imports only itself
    ("traceql.collectors.driver", "traceql.errors"),
    ("traceql.sources.nsys", "traceql.analyzers.overlap"),  # sources import no analysis ...
    ("traceql.sources.nsys_plan", "traceql.analyzers.machine"),  # ... but facts
    ("traceql.model.schema", "traceql.trace"),
    ("traceql.labelling.label", "traceql.commands.detect"),
    ("traceql.labelling.label", "traceql.verdicts.pricing"),  # labels know nothing of the verdicts
    ("traceql.sources.runs", "traceql.labelling.request"),
    ("traceql.commands.detect", "traceql.cli.common"),
    ("traceql.trace", "traceql.collectors.manifest"),  # only what runs workloads or reads a run folder
    ("traceql.commands.profile", "traceql.commands.ranks"),  # a command imports no other command
    ("traceql.cli.detect", "traceql.labelling.label"),  # the command line: the light options alone
])
def test_a_wrong_import_is_caught(importer: str, imported: str) -> None:
    table = rooms()
    graph = import_graph()
    allowed = not violations(graph, table)
    graph[importer] = graph.get(importer, set()) | {imported}
    found = [v for v in violations(graph, table) if v.startswith(f"{importer} -> {imported}:")]
    assert allowed and (found if importer != "traceql.sources.nsys_plan" else not found)


def test_imports_inside_functions_and_by_name_are_seen(tmp_path: Path) -> None:
    modules = set(import_graph())
    (tmp_path / "lazy.py").write_text(LAZY + 'NAMED = "traceql.verdicts.pricing"\n')
    assert imports(tmp_path / "lazy.py", modules) == {"traceql.commands.ranks", "traceql.verdicts.pricing"}
    (tmp_path / "sub.py").write_text("from traceql.analyzers.replay import run, WAYS\n")  # a module and a name
    assert imports(tmp_path / "sub.py", modules) == {"traceql.analyzers.replay", "traceql.analyzers.replay.run"}


def test_a_cycle_is_caught() -> None:
    graph = import_graph()
    assert cycles(graph) == []
    graph["traceql.analyzers.replay.run"].add("traceql.analyzers.replay.windows")  # windows imports run
    assert cycles(graph) == [["traceql.analyzers.replay.run", "traceql.analyzers.replay.windows"]]


def _code_lines(path: Path) -> int:
    """The lines of a module that are neither its docstring, nor an import, nor blank or a comment."""
    tree = ast.parse(path.read_text())
    body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(
        tree.body[0].value, ast.Constant) else tree.body
    counted = set()
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            continue
        counted.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return len(counted)


def test_init_files_hold_no_logic() -> None:
    inits = [p for pkg in (*PACKAGES, "tests") for p in (ROOT / pkg).rglob("__init__.py")
             if p != ROOT / "traceql" / "__init__.py"]
    assert len(inits) > 10
    big = {str(p.relative_to(ROOT)): n for p in inits if (n := _code_lines(p)) > MAX_INIT_LINES}
    assert big == {}
    defining = [str(p.relative_to(ROOT)) for p in inits
                if any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.parse(p.read_text()).body)
                and "_child" not in p.parts]
    assert defining == []


def test_the_command_line_loads_without_the_analysis_packages() -> None:
    """`traceql collect` runs on a GPU host that has torch and not polars or DuckDB: the command line's modules
    import them only when a command that reads traces runs."""
    code = ("import sys, traceql.cli; heavy = sorted(m for m in ('polars', 'duckdb', 'sklearn', 'numpy') "
            "if m in sys.modules); print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_commands_global_options_are_set_without_the_analysis_packages() -> None:
    """What every command runs first (its global options: ``cli.common.configure``, which loads the libraries
    a Ctrl-C must not land in) works where polars, DuckDB, NumPy and scikit-learn cannot be imported, as on
    `collect`'s GPU host (the cache's kept results, which are frames, had made it import polars)."""
    code = ("import sys\nfor m in ('polars', 'duckdb', 'sklearn', 'numpy'): sys.modules[m] = None\n"
            "from traceql.cli.common import configure\nconfigure(no_cache=True)\nprint('set')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "set\n"), done.stderr
