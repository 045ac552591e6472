"""``traceql`` as a child process sees it: the Python that runs the model (which may hold torch alone) gets
this folder's parent on its PYTHONPATH and imports the collectors as ``traceql.collectors`` — the folder that
holds them, whether an installed traceql or a source checkout — and nothing else of traceql or of the
packages installed beside it."""

from pathlib import Path

__path__ = [str(Path(__file__).resolve().parents[3])]  # the folder holding collectors/ (<it>/collectors/_child/traceql)
