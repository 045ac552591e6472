"""Collectives read from a trace: their sizes from wherever the trace or its run folder records them, and the
``collectives`` relation (``traceql.analyzers.collectives``)."""
