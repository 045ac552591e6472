"""The normalized trace model: its relations and result schemas (``schema``), kernel names and keys
(``names``), and the DuckDB connection it lives in (``engine``)."""
