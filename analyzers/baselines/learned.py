"""Within-trace estimates corrected by what isolated twins measured: factors learned from the ground-truth matrix.

A within-trace estimate is off in ways that repeat across models. A *borrowed* estimate (the key's clean
median elsewhere in the step) of a vectorized element-wise kernel is some 10 % short, because one grid and
block serve tensors of several sizes; a *contaminated* one (the position's shortest instance, itself beside an
all-reduce) of a reduction such as ``reduce_kernel`` is some 15 % long. The matrix measures each against the
kernel's isolated twin: a factor is the median, over the models that ran the kernel, of each model's median
``estimate / twin`` for one reference kind and kernel identity (the key's name part: namespaces and template
arguments, not grid and block), kept where at least :data:`MIN_MODELS` models agree to have one. Clean
estimates get one factor for all kernels (their bias, near nothing). The estimate becomes ``estimate /
factor``, never below what the overlap allows (``physical.floor``).

Only the kinds in :data:`SCALED` are corrected: the ones whose factors, learned with a whole model family held
out, cost no family F1 (``bench/validate.py``'s family-held-out labels, ``docs/validation.md``). Contaminated
estimates qualify (an overlapped shortest instance is long by much the same share on every family); borrowed
ones do not (a key's clean median elsewhere is short on some families and long on others: factors for it cost
Qwen2-MoE and ViT F1).

The table ships as ``factors.json`` beside this module, learned from every family of the matrix, its library
models included (``bench/validate.py --write``), with the families and GPU kinds it was learned on (``gpus``:
:data:`GPU_KINDS`): how much a kernel beside an all-reduce slows depends on the GPU's memory and SMs. On another GPU,
or one the trace does not name, the estimates stay as they are (:func:`chosen`); where they are corrected,
``detect`` says so in a note (:func:`applied`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import polars as pl

from traceql.analyzers.baselines.kinds import BORROWED, CLEAN, CONTAMINATED, CORRECTED

FACTORS = Path(__file__).with_name("factors.json")
ESTIMATED = (CLEAN, BORROWED, CORRECTED, CONTAMINATED)  # the kinds a factor could correct
SCALED = (CONTAMINATED,)  # the kinds it does: those whose factors cost no family held out F1
# the GPU kinds factors are learned on and applied to: on H200 the contaminated factors cost the GPT-2 pairs F1
# (0.933 -> 0.916 on 4 GPUs at 2 MB), and the H200 library runs hold too few contaminated kernels to learn from
GPU_KINDS = ("h100",)
MIN_MODELS = 2  # a kernel's factor needs this many models that ran it with that kind of estimate
SCHEMA = {"reference_kind": pl.String, "identity": pl.String, "factor": pl.Float64, "models": pl.UInt32}
_SHAPE = r" g\S+ b\S+$"  # a key's grid and block, after its name identity (``traceql.model.names.with_keys``)


def empty() -> pl.DataFrame:
    """No factors: every estimate as the trace gives it."""
    return pl.DataFrame(schema=SCHEMA)


@cache
def _file() -> dict:
    try:
        return json.loads(FACTORS.read_text())
    except (OSError, ValueError):
        return {}


def shipped() -> pl.DataFrame:
    """The factors learned from the whole matrix (``factors.json``); none where the file is missing."""
    rows = _file().get("factors")
    return empty() if not rows else pl.DataFrame(rows, schema=SCHEMA, orient="row")


def learned_on() -> list[str]:
    """The GPU kinds the shipped factors were learned on and apply to (``H100``: :data:`GPU_KINDS`)."""
    return list(_file().get("gpus", []))


def families() -> list[str]:
    """The model families the shipped factors were learned on."""
    return list(_file().get("families", []))


def applied(table: pl.DataFrame) -> str | None:
    """The note ``detect`` gives where ``table`` applies to a run's estimates: which kinds, learned on which
    families and GPUs (the shipped table), or that the caller's own factors were used; None for none."""
    if table.is_empty():
        return None
    kinds = ", ".join(sorted(set(table["reference_kind"])))
    if table.equals(shipped()):
        learned = f"{len(families())} model families ({', '.join(families())}) on {', '.join(learned_on())}"
        return f"note: {kinds} estimates divided by factors learned on {learned}"
    return f"note: {kinds} estimates divided by the given factors ({table.height})"


def chosen(given: pl.DataFrame | None, gpu_names: Iterable[str | None]) -> pl.DataFrame:
    """The factors a run's estimates get: ``given`` where the caller chose a table; else the shipped ones when
    every GPU of the run is named and of a kind they were learned on (``NVIDIA H100 80GB HBM3``: H100), and
    none otherwise."""
    if given is not None:
        return given
    names, kinds = list(gpu_names), [k.lower() for k in learned_on()]
    if not names or not kinds or any(n is None or not any(k in n.lower() for k in kinds) for n in names):
        return empty()
    return shipped()


def _join_identity() -> pl.Expr:
    """A kernel's identity as the factors key it (null for clean estimates: one factor for all)."""
    return pl.when(pl.col("reference_kind") == CLEAN).then(None).otherwise(pl.col("identity"))


def learn(rows: pl.DataFrame, min_models: int = MIN_MODELS, kinds: Iterable[str] = SCALED) -> pl.DataFrame:
    """The factors (:data:`SCHEMA`) from ``rows``: one per kernel judged against a twin, with ``model`` (what
    agrees: a family), ``reference_kind``, ``identity``, ``estimate_ns`` (the uncorrected estimate) and
    ``twin_ns``; for the estimates of ``kinds`` alone."""
    ok = (pl.col("reference_kind").is_in(list(kinds)) & (pl.col("estimate_ns") > 0) & (pl.col("twin_ns") > 0))
    per_model = (rows.filter(ok.fill_null(False))
                 .with_columns(_join_identity().alias("identity"),
                               (pl.col("estimate_ns") / pl.col("twin_ns")).alias("_ratio"))
                 .group_by("reference_kind", "identity", "model").agg(pl.col("_ratio").median()))
    return (per_model.group_by("reference_kind", "identity")
            .agg(pl.col("_ratio").median().alias("factor"), pl.len().cast(pl.UInt32).alias("models"))
            .filter(pl.col("models") >= min_models)
            .sort("reference_kind", "identity", nulls_last=True).select(list(SCHEMA)))


def write(factors: pl.DataFrame, note: str, gpus: list[str], learned_families: list[str]) -> str:
    """``factors`` as the text of ``factors.json`` (``note``: what they were learned from, on ``gpus``: kinds
    such as ``H100``, of ``learned_families``)."""
    rows = [[k, i, round(f, 4), m] for k, i, f, m in factors.select(list(SCHEMA)).iter_rows()]
    return json.dumps({"learned_on": note, "gpus": gpus, "families": learned_families, "kinds": list(SCALED),
                       "min_models": MIN_MODELS, "factors": rows}, indent=0) + "\n"


def factor_of(estimates: pl.DataFrame, factors: pl.DataFrame | None = None) -> pl.Series:
    """Each row's factor (1.0 where none applies) for ``estimates`` with ``key`` and ``reference_kind``;
    ``factors`` None: the shipped ones. The identity is read once per distinct key."""
    table = shipped() if factors is None else factors
    if table.is_empty() or estimates.is_empty():
        return pl.Series("estimate_factor", [1.0] * estimates.height, pl.Float64)
    pairs = estimates.select("key", "reference_kind").unique().with_columns(
        pl.col("key").cast(pl.String).str.replace(_SHAPE, "").alias("identity"))
    pairs = pairs.with_columns(_join_identity().alias("identity")).join(
        table.select("reference_kind", "identity", "factor"), on=["reference_kind", "identity"], how="left",
        nulls_equal=True).select("key", "reference_kind", "factor")
    return (estimates.select("key", "reference_kind")
            .join(pairs, on=["key", "reference_kind"], how="left", nulls_equal=True, maintain_order="left")
            ["factor"].fill_null(1.0).alias("estimate_factor"))
