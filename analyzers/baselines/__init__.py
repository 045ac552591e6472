"""Each compute kernel's unslowed duration: from an isolated run (``isolated``), or estimated within
the trace (``within_trace``)."""
