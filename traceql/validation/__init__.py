"""The ground-truth matrix and every verdict scored on it (``bench/validate.py``, ``docs/validation.md``)."""

from traceql.validation.matrix import Configuration, Matrix, MatrixRun, Pooled, load_matrix

__all__ = ["Configuration", "Matrix", "MatrixRun", "Pooled", "load_matrix"]
