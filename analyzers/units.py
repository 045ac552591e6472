"""Units written once. Imports nothing, so the command line may use them without loading the analysis."""

MIB = 1 << 20  # a mebibyte: DDP's bucket_cap_mb counts these, and sizes are shown in them


def size(n: float | None) -> str:
    """Bytes in binary units, the largest that keeps the figure at 1 or more: ``384 B``, ``27.0 MiB``; ``?``
    for none."""
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"
