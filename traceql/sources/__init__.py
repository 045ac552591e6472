"""One module per input format; each fills the normalized model (traceql.model) in a DuckDB connection."""
