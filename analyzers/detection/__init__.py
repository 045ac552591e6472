"""Single-trace slowdown labels: the feature table, the detector, and the labels (paired or detected)."""
