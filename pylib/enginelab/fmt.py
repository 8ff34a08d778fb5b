"""Number formatting for everything a reader sees, in one place.

Sizes are decimal (1 GB = 1e9 bytes), as GGUF file listings and vendor specs write them; `gib` is there
for llama.cpp's own MiB/GiB log lines.
"""

from __future__ import annotations

import math

GB = 1e9
GIB = 1024**3


def raw(v) -> str:
    """The machine-readable value for data-value attributes: shortest round-trip repr, '' for None."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return repr(v)
    return str(v)


def gb(n_bytes: float, digits: int = 1) -> str:
    """'14.8 GB' (decimal)."""
    return f"{n_bytes / GB:,.{digits}f} GB"


def gb_num(n_bytes: float, digits: int = 1) -> str:
    return f"{n_bytes / GB:,.{digits}f}"


def gib(n_bytes: float, digits: int = 2) -> str:
    return f"{n_bytes / GIB:,.{digits}f} GiB"


def mib(n_bytes: float) -> str:
    """'1.00 MiB', '64 KiB', '512 B': bytes read or requested (binary units, as HTTP ranges count)."""
    if n_bytes >= 1 << 20:
        return f"{n_bytes / (1 << 20):,.2f} MiB"
    if n_bytes >= 1 << 10:
        return f"{n_bytes / (1 << 10):,.0f} KiB"
    return f"{n_bytes:,.0f} B"


def bytes_auto(n_bytes: float) -> str:
    """Human size with a unit chosen by magnitude: '512 B', '131 KB', '4.9 GB'."""
    a = abs(n_bytes)
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if a >= scale:
            v = n_bytes / scale
            return f"{v:,.{1 if abs(v) < 100 else 0}f} {unit}"
    return f"{n_bytes:,.0f} B"


def rate(tok_s: float | None) -> str:
    """Tokens per second with sensible precision: '5.8', '41.2', '1,505'."""
    if tok_s is None or (isinstance(tok_s, float) and not math.isfinite(tok_s)):
        return "—"
    if tok_s >= 100:
        return f"{tok_s:,.0f}"
    if tok_s >= 10:
        return f"{tok_s:.1f}"
    return f"{tok_s:.2f}" if tok_s < 1 else f"{tok_s:.1f}"


def pct(share: float | None, digits: int = 0) -> str:
    if share is None:
        return "—"
    return f"{share * 100:.{digits}f}%"


def integer(n) -> str:
    return f"{int(n):,}"


def tokens(n) -> str:
    """Context sizes the way people say them: 8192 -> '8,192 (8k)'; others with separators."""
    n = int(n)
    if n >= 1024 and n % 1024 == 0:
        return f"{n:,} ({n // 1024}k)"
    return f"{n:,}"


def seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"
