"""Byte counts for people to read, in binary (IEC) units: 1 KiB is 1,024 bytes.

One helper so every message names sizes the same way: three commands had three formatters, one of them labelling
1,024-byte units "KB" (1,000 bytes in SI). The sizes the CLI reads (``tessera cache prune --max-size 2G``) are
binary too. Nothing here depends on the rest of Tessera, so operators and commands alike use it.
"""

from __future__ import annotations

UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: int) -> str:
    """``512 B``, ``1.5 KiB``, ``2.0 GiB``: whole bytes under a KiB, one decimal in the largest unit that keeps the
    number under 1,024 as printed (1,048,575 bytes is ``1.0 MiB``, not ``1024.0 KiB``)."""
    size = float(n)
    for unit in UNITS[:-1]:
        if round(abs(size), 1) < 1024:
            break
        size /= 1024
    else:
        unit = UNITS[-1]
    return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
