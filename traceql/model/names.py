"""Kernel names: communication kernels and their collectives, short names, and the kernel signature.

A kernel's *signature* is its short name + grid + block (``Kernel2 g256x1x1 b256x1x1``): a coarse grouping
for summaries (one short name covers many kernels: ``vectorized_elementwise_kernel`` is a Fill, a Mul, an
Add …). Its *key* is its demangled name + grid + block: what twins are matched by. Demanglers spell one
name differently (nsys: ``(bool)1``, ``<unnamed>``, ``[lambda(int) (instance 1)]``; torch.profiler: ``true``,
``(anonymous namespace)``, ``{lambda(int)#1}``), so the key holds the name's *identity*: its words and
numbers in order, without argument lists, casts or spelling (:func:`identity`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # polars loads with the analysis, not for `traceql collect`
    import polars as pl

# Communication kernels of NCCL, RCCL and HCCL, old (ncclKernel_*) and new (ncclDevKernel_*,
# ncclSymDevKernel_*) forms. Applied to the short name (nsys) or the name (Kineto).
COMM_NAME_REGEX = r"^(void )?(nccl|rccl|hccl)[A-Za-z]*Kernel"
# What a collective is called inside a comm kernel name: ncclDevKernel_AllReduce_Sum_f32_RING_LL,
# ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_SendRecv(...).
COLLECTIVE_REGEX = r"Kernel_([A-Za-z]+)"
ALGO_REGEX = r"_(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|NVLS_TREE|NVLS|PAT)(_|\(|$)"
PROTO_REGEX = r"_(LL128|LL|SIMPLE)(_|\(|$)"
SHAPE_COLUMNS = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
SIGNATURE_COLUMNS = ["short_name", *SHAPE_COLUMNS]
_ARGS = r"\((?:[^()]|\([^()]*\))*\)"  # a lambda's parameter list
_LAMBDA = re.compile(rf"\{{lambda{_ARGS}#(\d+)\}}|\[lambda{_ARGS} \(instance (\d+)\)\]")
_CAST = re.compile(r"\((?:unsigned |signed )?(?:bool|char|short|int|long|long long)\)")
_SUFFIX = re.compile(r"\b(\d+)(?:ull|ll|ul|u|l)\b", re.IGNORECASE)
_PARENS = re.compile(r"\([^()]*\)")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|-?\d+|#\d+")
_NOISE = {"void", "const", "volatile", "struct", "class", "typename"}


def kind_expr(name_col: str) -> str:
    """SQL that classifies a kernel as ``comm`` or ``compute`` from its name column."""
    return f"CASE WHEN regexp_matches({name_col}, '{COMM_NAME_REGEX}', 'i') THEN 'comm' ELSE 'compute' END"


def collective_expr(name_col: str) -> str:
    """SQL naming the collective of a comm kernel, e.g. ``AllReduce`` or ``AllReduce/RING/LL``."""
    coll = f"regexp_extract({name_col}, '{COLLECTIVE_REGEX}', 1)"
    algo = f"regexp_extract({name_col}, '{ALGO_REGEX}', 1)"
    proto = f"regexp_extract({name_col}, '{PROTO_REGEX}', 1)"
    return f"concat_ws('/', nullif({coll}, ''), nullif({algo}, ''), nullif({proto}, ''))"


def short_name(name: str) -> str:
    """A kernel's base name, as nsys shows it: no return type, namespaces, templates or arguments."""
    text = name.replace("(anonymous namespace)", "anonymous").replace("<unnamed>", "anonymous")
    depth, kept = 0, []
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            if ch == "(":
                break  # the argument list
            kept.append(ch)
    base = "".join(kept).strip().split(" ")[-1].split("::")[-1]
    return base or name


def identity(name: str) -> str:
    """A demangled kernel name's words and numbers in order — its namespaces, templates and their arguments —
    the same whichever demangler wrote it: argument lists, casts, ``const`` and spacing are dropped, lambdas
    become ``lambda #N``. Checked on every kernel of every export we have: no two names collide."""
    text = name.replace("(anonymous namespace)", "anonymous").replace("<unnamed>", "anonymous")
    text = _LAMBDA.sub(lambda m: f" lambda #{m.group(1) or m.group(2)} ", text)
    text = _SUFFIX.sub(r"\1", _CAST.sub("", text).replace("true", "1").replace("false", "0"))
    before = None
    while before != text:  # argument lists, innermost first
        before, text = text, _PARENS.sub(" ", text)
    return " ".join(t for t in _TOKEN.findall(text) if t not in _NOISE)


_TELLS_APART = re.compile(r"Functor|functor|gemm|Gemm|GEMM|_kernel_cuda|Op$")


def display_name(name: str, short: str) -> str:
    """The short name and what tells it apart from other kernels of that short name — its functor
    (``vectorized_elementwise_kernel [MulFunctor]``) or its GEMM configuration (``Kernel2 [..._sgemm_128x64...]``)."""
    words = [w for w in identity(name).split() if w != short and _TELLS_APART.search(w)]
    return f"{short} [{words[-1]}]" if words else short


def short_names(names: pl.Series, column: str = "name") -> pl.DataFrame:
    """``column → short_name`` for the distinct names of a column (one Python call per distinct name)."""
    import polars as pl

    distinct = names.unique().drop_nulls()
    return pl.DataFrame({column: distinct, "short_name": [short_name(n) for n in distinct]})


def signature() -> pl.Expr:
    """The kernel signature of a frame with the :data:`SIGNATURE_COLUMNS`."""
    import polars as pl

    return pl.format("{} g{}x{}x{} b{}x{}x{}", *SIGNATURE_COLUMNS).alias("signature")


def with_signature(kernels: pl.DataFrame) -> pl.DataFrame:
    """``kernels`` with its ``signature`` column."""
    return kernels.with_columns(signature())


def with_keys(kernels: pl.DataFrame) -> pl.DataFrame:
    """``kernels`` with its ``signature`` and ``key`` (name identity + grid + block) columns, computed once per
    distinct name and shape (Categorical when ``name`` is)."""
    import polars as pl

    on = ["name", *SIGNATURE_COLUMNS]
    combos = kernels.select(on).unique(maintain_order=True)
    names = combos["name"].unique(maintain_order=True).drop_nulls()
    ids = pl.DataFrame([names, pl.Series("_identity", [identity(n) for n in names], pl.String)])
    key = pl.format("{} g{}x{}x{} b{}x{}x{}", "_identity", *SHAPE_COLUMNS).alias("key")
    string = kernels.schema["name"] == pl.String
    keyed = combos.join(ids, on="name", how="left", maintain_order="left").select(
        *on, *(e if string else e.cast(pl.Categorical) for e in (signature(), key)))
    return kernels.join(keyed, on=on, how="left", nulls_equal=True, maintain_order="left")
