"""One home for "label these inputs", which `detect`, `ranks`, `report`, `export perfetto`, `diff` and
`dataset add` all ask for:

- ``request``: what a command was asked, built once (the inputs or the embedded example, the baselines, the
  threshold; user options checked, outputs refused where they are inputs);
- ``inputs``: a trace's timeline, an isolated run and Nsight Compute metrics, each read once;
- ``sources``: which label source applies (paired, in-run, detector) and the sentence that says so;
- ``label``: the labelling itself (features, references, labels);
- ``result``: the labelled result, its per-rank summary and the merge of several runs' results;
- ``steps``: one run's steps, arrivals at collectives and stragglers, labelled (`ranks`, `profile buckets`).

Nothing is imported here: ``traceql.labelling.options`` loads without polars (the command line's defaults).
"""
