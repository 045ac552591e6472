"""Slowdown datasets on disk: the store (``store``), adding labelled runs (``add``), building a sweep
(``build``) and summarising (``summary``). The commands are in ``traceql.commands.dataset``."""
