"""Run a training workload under a profiler and write its traces with a manifest (imports no traceql)."""
