"""One module per command (``traceql X`` → ``traceql.commands.X``): the short pipeline it runs, as the
Python API. Each checks its options (``options``), reads its inputs once and returns its result."""
