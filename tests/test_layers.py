"""Imports point one way: cli → commands → the middle layer → model → errors; no command imports another;
the leaves `traceql.analyzers` and `traceql.collectors` (the repository's `analyzers/` and `collectors/`)
import nothing of the rest of traceql; sources and the model import no analysis; only what runs workloads
(or reads a run folder's manifest) imports the collectors, but for their atomic write, every output's. Every
import is read from the source, including lazy ones."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.paths import ROOT

PACKAGES = ("traceql", "analyzers", "collectors")  # the repository's folders; installed, all inside traceql
LEAVES = ("traceql.analyzers", "traceql.collectors")
# traceql's layers, lowest first; a module may import its own layer and those below it
LAYERS = [
    ("traceql.errors", "traceql.jsonfile"),
    ("traceql.model",),
    ("traceql.sources", "traceql.trace", "traceql.export", "traceql.collecting", "traceql.parallel",
     "traceql.tuning"),
    ("traceql.labelling", "traceql.dataset", "traceql.comms"),
    ("traceql.commands",),
    ("traceql.validation",),  # every verdict scored on the ground-truth matrix: it runs the commands
    ("traceql.cli", "traceql.__main__"),
]
ATOMIC_WRITE = "traceql.collectors.files"  # the one atomic write: the collectors' own, every output's too
RUN_WORKLOADS = ("traceql.collecting", "traceql.commands.collect", "traceql.dataset.build",
                 "traceql.sources.runfolder", "traceql.commands.profile", "traceql.tuning")


def module_name(path: Path) -> str:
    """A file's module as installed: the leaves' folders sit inside traceql (setup.py)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(parts if parts[0] == "traceql" else ("traceql", *parts))


def imports(path: Path, modules: set[str]) -> set[str]:
    """Every module of ours ``path`` imports (``from a import b`` counts as ``a.b`` when that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules)
    return {m for m in found if m.split(".")[0] == "traceql"}


def layer(module: str) -> int | None:
    if module == "traceql":  # the facade: it may name anything (lazily)
        return len(LAYERS)
    for level, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return level
    return None


def under(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def command(module: str) -> str | None:
    """The command a module of ``traceql.commands`` is (None for any other module, and for the package)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "commands" else None


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import that points the wrong way, as ``importer -> imported: why``."""
    out = []
    for src, targets in sorted(graph.items()):
        for dst in sorted(targets):
            leaf = next((p for p in LEAVES if under(src, p)), None)
            if leaf is not None:
                if not under(dst, leaf):
                    out.append(f"{src} -> {dst}: a leaf imports only itself")
            elif under(src, "traceql.model", "traceql.sources") and under(dst, "traceql.analyzers"):
                out.append(f"{src} -> {dst}: sources and the model import no analysis")
            elif under(dst, "traceql.collectors"):
                if not under(src, *RUN_WORKLOADS) and dst != ATOMIC_WRITE:
                    out.append(f"{src} -> {dst}: only what runs workloads imports the collectors")
            elif under(dst, "traceql.analyzers"):
                continue  # any layer above the model composes the analyses
            elif command(src) is not None and command(dst) not in (None, command(src)):
                out.append(f"{src} -> {dst}: a command imports another command")
            elif dst != "traceql":
                low, high = layer(src), layer(dst)
                if low is None or high is None:
                    out.append(f"{src} -> {dst}: a module outside the layers")
                elif high > low:
                    out.append(f"{src} -> {dst}: imports a higher layer")
    return out


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}
    return {name: imports(path, set(files)) for name, path in files.items()}


def test_imports_point_one_way() -> None:
    graph = import_graph()
    assert len(graph) > 40 and any(graph.values())
    assert violations(graph) == []


@pytest.mark.parametrize("importer,imported", [
    ("traceql.analyzers.overlap", "traceql.model.names"),
    ("traceql.collectors.driver", "traceql.errors"),
    ("traceql.sources.nsys", "traceql.analyzers.overlap"),
    ("traceql.model.schema", "traceql.trace"),
    ("traceql.labelling.label", "traceql.commands.detect"),
    ("traceql.sources.runs", "traceql.labelling.request"),
    ("traceql.commands.detect", "traceql.cli.common"),
    ("traceql.trace", "traceql.collectors.manifest"),
    ("traceql.commands.profile", "traceql.commands.ranks"),
])
def test_a_wrong_import_is_caught(importer: str, imported: str) -> None:
    graph = import_graph()
    graph[importer] = graph.get(importer, set()) | {imported}
    assert [v for v in violations(graph) if v.startswith(f"{importer} -> {imported}:")]


def test_the_command_line_loads_without_the_analysis_packages() -> None:
    """`traceql collect` runs on a GPU host that has torch and not polars or DuckDB: the command line's modules
    import them only when a command that reads traces runs."""
    import subprocess
    import sys

    code = ("import sys, traceql.cli; heavy = sorted(m for m in ('polars', 'duckdb', 'sklearn', 'numpy') "
            "if m in sys.modules); print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
