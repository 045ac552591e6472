"""Profiles, clusters and `profile`'s folders: numbers that cannot be, files that are not files, outputs
that are files."""

from __future__ import annotations
