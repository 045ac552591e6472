"""A corpus of bad inputs, made at test time from the shipped traces (nothing binary is committed).

Each case builds its files in a temporary folder and returns the command to run and what must happen: the
exit code, a phrase of the one ``error:`` line (or of a warning, for data that is still usable), the file
that line must name, and the inputs whose bytes must not change. The cases live by kind in ``cases_*.py``.
"""

from __future__ import annotations

from tests.bad_inputs import (  # noqa: F401 - each registers its cases
    cases_buckets,
    cases_collectives,
    cases_commands,
    cases_dataset,
    cases_files,
    cases_kineto,
    cases_ncu_sql,
    cases_outputs_options,
    cases_parallel,
    cases_profiles,
    cases_query_collect,
    cases_sources_more,
    cases_sqlite,
)
from tests.bad_inputs.scenario import CASES, Scenario

__all__ = ["CASES", "Scenario"]
