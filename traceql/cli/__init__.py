"""The `traceql` command line: one module per command, each parsing options, calling its function in
``traceql.commands`` and rendering the result (``app`` puts them together). No analysis happens here."""

from traceql.cli.app import app

__all__ = ["app"]
