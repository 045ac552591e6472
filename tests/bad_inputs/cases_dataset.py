"""Sweeps and dataset folders: fields of the wrong type or range, dataset folders that cannot be written or read."""

from __future__ import annotations
