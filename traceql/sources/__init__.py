"""Input formats → the normalized model: one reader module per format (``registry``: which reader reads a
file, and how a new format is added), the files given (``inputs``, ``files``), which of them form a run
(``runs``) and the parts a run is read in (``shards``)."""

from traceql.sources.files import InputFile, by_run
from traceql.sources.registry import READERS, load, reader, recognise, refusal

__all__ = ["READERS", "InputFile", "by_run", "load", "reader", "recognise", "refusal"]
