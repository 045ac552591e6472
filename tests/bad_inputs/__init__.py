"""Inputs broken the ways users break them, each with the phrase its one-line error must contain: traces
(``traces``) and, as scenarios of a command each (``scenario``), the ``cases_*`` modules."""

from tests.bad_inputs.traces import CASE_IDS, CASES

__all__ = ["CASE_IDS", "CASES"]
