"""Reading a profile folder (every ``*.json`` a profile, checked by ``traceql.collectors.profile_format``) and a
cluster file; each fault is one :class:`InputError` naming the file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceql.analyzers.solver import Node
from traceql.collectors.errors import CollectError
from traceql.collectors.fields import shown
from traceql.collectors.profile_format import file_name, validate
from traceql.errors import InputError
from traceql.jsonfile import load_json

NODE_KEYS = ("name", "gpu", "count")
EXAMPLE = '{"nodes": [{"name": "node0", "gpu": "NVIDIA H200", "count": 2}]}'


@dataclass
class Profiles:
    """The profiles of a folder by (kind, GPU), and the file each came from."""

    folder: Path
    data: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    paths: dict[tuple[str, str], Path] = field(default_factory=dict)

    def get(self, kind: str, gpu: str) -> dict[str, Any] | None:
        return self.data.get((kind, gpu))

    def path(self, kind: str, gpu: str) -> Path:
        """The file of that profile, or where it would be."""
        return self.paths.get((kind, gpu), self.folder / file_name(kind, gpu))

    def require(self, kind: str, gpu: str, node: str) -> dict[str, Any]:
        """The profile, or an error naming the file that is missing."""
        found = self.get(kind, gpu)
        if found is None:
            have = sorted({g for k, g in self.data if k == kind}) or ["none"]
            raise InputError(f"no {kind} profile for {gpu!r} (the GPU of node {node}); {kind} profiles here: "
                             f"{', '.join(have)}; measure it with `traceql profile` on that GPU",
                             path=str(self.path(kind, gpu)))
        return found

    def of_kind(self, kind: str) -> dict[str, dict[str, Any]]:
        """The profiles of one kind by GPU."""
        return {gpu: data for (k, gpu), data in sorted(self.data.items()) if k == kind}


def read_profile(path: str | Path) -> dict[str, Any]:
    """One profile file, read and checked (``traceql.collectors.profile_format.validate``); an
    :class:`InputError` naming the file, the entry and the key at fault."""
    try:
        return validate(load_json(path), str(path))
    except CollectError as err:
        raise InputError(str(err)) from None


def read_profiles(folder: str | Path) -> Profiles:
    """Every ``*.json`` of ``folder`` as a profile; two of the same kind and GPU, or of different models,
    are refused."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("no such folder" if not folder.exists() else "not a folder (expected a folder of "
                         "profiles)", path=str(folder))
    out = Profiles(folder)
    for path in sorted(folder.glob("*.json")):
        data = read_profile(path)
        key = (data["kind"], data["gpu"])
        if key in out.data:
            raise InputError(f"a second {key[0]} profile of {key[1]!r} (the first: {out.paths[key]}); keep one",
                             path=str(path))
        out.data[key], out.paths[key] = data, path
    if not out.data:
        raise InputError("no profiles (*.json) in it; `traceql profile` writes them", path=str(folder))
    models = {d["model"] for d in out.data.values()}
    if len(models) > 1:
        raise InputError(f"profiles of {len(models)} models ({', '.join(sorted(models))}); keep one model's "
                         "profiles in a folder", path=str(folder))
    return out


def _node(i: int, node: Any, where: str) -> Node:
    if not isinstance(node, dict):
        raise InputError(f"node {i} is not an object (expected {{\"name\", \"gpu\", \"count\"}})", path=where)
    for key in NODE_KEYS:
        if key not in node:
            raise InputError(f"node {i}: missing key {key!r} (a node has {', '.join(NODE_KEYS)})", path=where)
    if extra := sorted(set(node) - set(NODE_KEYS)):
        raise InputError(f"node {i}: unknown key {extra[0]!r} (a node has {', '.join(NODE_KEYS)})", path=where)
    for key in ("name", "gpu"):
        if not isinstance(node[key], str) or not node[key].strip():
            raise InputError(f"node {i}: {key} must be a non-empty string, got {shown(node[key])}", path=where)
    count = node["count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InputError(f"node {i} ({node['name']}): count must be an integer of at least 1, got {shown(count)}",
                         path=where)
    return Node(node["name"], node["gpu"], count)


def read_cluster(source: str | Path | Mapping[str, Any]) -> tuple[Node, ...]:
    """The nodes of a cluster file ``{"nodes": [{"name", "gpu", "count"}, ...]}`` (or of that object)."""
    where = "cluster" if isinstance(source, Mapping) else str(source)
    data = source if isinstance(source, Mapping) else load_json(source)
    if not isinstance(data, Mapping) or not isinstance(data.get("nodes"), list):
        raise InputError(f"not a cluster file (expected {EXAMPLE})", path=where)
    if extra := sorted(set(data) - {"nodes"}):
        raise InputError(f"unknown key {extra[0]!r} (a cluster file has one key, nodes)", path=where)
    if not data["nodes"]:
        raise InputError("no nodes", path=where)
    nodes = tuple(_node(i, node, where) for i, node in enumerate(data["nodes"]))
    names = [n.name for n in nodes]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise InputError(f"node name {twice[0]!r} used twice; names must differ", path=where)
    return nodes
