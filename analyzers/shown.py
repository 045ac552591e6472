"""How much the reports show where a run is large, written once. Imports nothing, so that the command line's
help states it without loading the analysis."""

RANKS_SHOWN = 8  # ranks a run may have for `ranks` to show each of them in its steps table
