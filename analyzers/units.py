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


def parse_size(text: str) -> int:
    """``4GB``, ``512MiB``, ``1e9`` as bytes; ValueError (saying what is wanted) unless a finite size of at least
    one byte."""
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": MIB, "GIB": 2**30}
    t = text.strip().upper()
    digits = t.rstrip("KMGIB")
    try:
        n = float(digits) * units[t[len(digits):]]
    except (ValueError, KeyError):
        raise ValueError("a size such as 4GB, 512MiB or 1e9 (bytes)") from None
    if not n >= 1 or n == float("inf"):
        raise ValueError("must be a finite size of at least 1 byte, such as 4GB, 512MiB or 1e9")
    return int(n)
