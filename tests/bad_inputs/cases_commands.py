"""The other commands' inputs and outputs: links and devices as outputs, outputs inside run folders,
schedulers and workers, numbers that are not numbers, names that would drive the terminal."""

from __future__ import annotations
