"""Units written once. Imports nothing, so the command line may use them without loading the analysis."""

MIB = 1 << 20  # a mebibyte: DDP's bucket_cap_mb counts these, and sizes are shown in them
