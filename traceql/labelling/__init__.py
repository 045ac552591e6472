"""One home for "label these inputs", which `detect`, `ranks`, `whatif`, `report`, `export perfetto`, `diff` and
`dataset add` all ask for:

- ``request``: what a command was asked, built once (the inputs or the embedded example, the baselines, the
  threshold; user options checked, outputs refused where they are inputs);
- ``inputs``: a trace's timeline, an isolated run and Nsight Compute metrics, each read once;
- ``modes``: which label source applies (paired, in-run, detector) and the sentence that says so;
- ``core``: what labelling a run whole and a rank at a time share (kernels prepared, the detector, labels);
- ``label``: a run labelled whole; ``by_rank`` a run labelled a shard at a time (its ``passes``, and ``judged``
  the rows its detector is fitted on);
- ``result``: the labelled result, its per-rank summary and the merge of several runs' results;
- ``options``: the options checked once, and their defaults.

Nothing is imported here: ``traceql.labelling.options`` loads without polars (the command line's defaults).
"""
