"""What the code shares is written once: the slowdown threshold's default, the MiB, the one model of an
all-reduce's time (its fit included), and the DDP bucket packing, each in one module that the rest imports."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.paths import ROOT

PACKAGES = ("traceql", "analyzers", "collectors")
# ``1 << 20`` that counts no bytes: rows of a batch, ranks of a run
COUNTS = {"traceql/labelling/inputs.py", "collectors/config.py"}
HOMES = {
    "the threshold's default (1.2)": "analyzers/detection/threshold.py",
    "the MiB (1 << 20, 2**20)": "analyzers/units.py",
    "a least-squares line (np.polyfit)": "analyzers/buckets.py",
    "an all-reduce's time (latency + bytes x ns per byte)": "analyzers/buckets.py",
    "DDP's bucket packing (def pack)": "analyzers/buckets.py",
}


MEBI = ((1, ast.LShift, 20), (2, ast.Pow, 20))


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string nodes that are docstrings (they may say 1.2 or MiB)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def found(tree: ast.AST) -> set[str]:
    """Which of :data:`HOMES`' concepts a module's code writes down itself."""
    out = set()
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docs and type(node.value) is float and node.value == 1.2:
            out.add("the threshold's default (1.2)")
        elif isinstance(node, ast.BinOp) and isinstance(node.left, ast.Constant) and isinstance(
                node.right, ast.Constant) and (node.left.value, type(node.op), node.right.value) in MEBI:
            out.add("the MiB (1 << 20, 2**20)")
        elif isinstance(node, ast.Attribute) and node.attr == "polyfit":
            out.add("a least-squares line (np.polyfit)")
        elif isinstance(node, ast.ClassDef):
            fields = {t.target.id for t in node.body if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)}
            if any("latency" in f for f in fields) and any("per_byte" in f or "per_mb" in f for f in fields):
                out.add("an all-reduce's time (latency + bytes x ns per byte)")
        elif isinstance(node, ast.FunctionDef) and node.name == "pack":
            out.add("DDP's bucket packing (def pack)")
    return out


def test_each_shared_concept_lives_in_one_module() -> None:
    where = defaultdict(list)
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            counts = {"the MiB (1 << 20, 2**20)"} if name in COUNTS else set()
            for concept in found(ast.parse(path.read_text())) - counts:
                where[concept].append(name)
    assert dict(where) == {concept: [home] for concept, home in HOMES.items()}


def test_a_second_copy_is_seen(tmp_path: Path) -> None:
    code = '''
"""Says 1.2 and 1 << 20 in its docstring, which is fine."""
THRESHOLD = 1.2
CAP = 25 * (1 << 20)
def fit(x, y):
    return np.polyfit(x, y, 1)
class Wire:
    latency_ns: float
    ns_per_byte: float
def pack(sizes, cap):
    return sizes
'''
    assert found(ast.parse(code)) == set(HOMES)
    assert found(ast.parse('"""1.2 and 1 << 20."""\nX = 1.25\nY = 1 << 21\n')) == set()
