"""python -m traceql: the command line."""

from traceql.cli import app

app(prog_name="traceql")
