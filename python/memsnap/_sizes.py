"""Sizes as people write them ("2 GiB", "512MB", 1 << 30) and as we print them."""
import re

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
          "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
          "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def parse_size(v):
    """Bytes from an int, or a string: a number and a unit (B, K/KB/KiB,
    M/MB/MiB, G/GB/GiB, T/TB/TiB, case-insensitive; powers of 1024 all, as
    memsnap's --cap and pytest-memray read them).  ValueError otherwise."""
    if isinstance(v, bool):
        raise ValueError("a size, not %r" % v)
    if isinstance(v, int):
        if v < 0:
            raise ValueError("a negative size: %d" % v)
        return v
    if isinstance(v, float):
        if v < 0 or v != v:
            raise ValueError("a bad size: %r" % v)
        return int(v)
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*", str(v))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError("not a size: %r (write it as 2 GiB, 512 MiB, 1.5G or a number "
                         "of bytes)" % (v,))
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_size(n):
    """1536 -> "1.50 KiB"; below 1 KiB, "N B"."""
    n = int(n)
    if abs(n) < 1024:
        return "%d B" % n
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n2 = n / 1024.0
        if abs(n2) < 1024 or unit == "TiB":
            return "%.2f %s" % (n2, unit)
        n = n2
    return "%d B" % n
