"""Pure analyses over the normalized model's frames: overlap, baselines, features, detector (imports no traceql)."""
