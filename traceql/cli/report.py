"""`traceql report`: one self-contained HTML page of what detect found."""

from __future__ import annotations
