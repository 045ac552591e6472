"""Verdicts that replay the run (``traceql.analyzers.replay``): what each cause costs a step.

- ``replayed``: a run replayed with its labels and its stragglers; its verdict, a finding a line;
- ``pricing``: the ranking of causes every verdict leads with, the stragglers' own cases, and what `detect`'s
  cases cost on the critical path;
- ``ranks``: each run's steps, arrivals and stragglers, priced by the replay (`ranks`' result);
- ``whatif``: every run of a request replayed, without each cause (`whatif`'s result);
- ``rebucketing``: the buckets of another DDP bucket cap (`whatif --bucket-cap`);
- ``measured``: how far such answers were off on the ground-truth matrix (``measured.json``).

Labels come from ``traceql.labelling``, which knows nothing of this room.
"""
