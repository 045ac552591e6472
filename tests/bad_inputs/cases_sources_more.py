"""Traces odd in ways a reader must name: huge ranks and steps, long names, damaged pages, dangling strings, a BOM."""

from __future__ import annotations
