"""What-if: a replay of a run from its trace, and what each step would have taken without each cause.

``graph`` what each GPU activity and CPU launch waited for; ``engine`` the longest-path pass (``compiled``: the
same, compiled); ``run`` the steps replayed as they were and without each cause (``scenarios``, ``removed``,
``without_straggler``; ``alone`` a collective's speed with nothing beside it); ``windows`` a long run a window of
steps at a time; ``rebucket`` another DDP bucket cap; ``activities`` what a replay is made of.
"""

from traceql.analyzers.replay.alone import CommAlone
from traceql.analyzers.replay.graph import OP_COLUMNS, OP_SCHEMA
from traceql.analyzers.replay.rebucket import bucket_shifts
from traceql.analyzers.replay.run import STEPS, WAYS, WhatIf, steps
from traceql.analyzers.replay.stored import Stored
from traceql.analyzers.replay.waits import WAITS
from traceql.analyzers.replay.windows import Mapper, windowed, windowed_modes, with_cases

__all__ = ["OP_COLUMNS", "OP_SCHEMA", "STEPS", "WAITS", "WAYS", "CommAlone", "Mapper", "Stored", "WhatIf",
           "bucket_shifts", "steps", "windowed", "windowed_modes", "with_cases"]
