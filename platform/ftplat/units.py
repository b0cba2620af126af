"""How durations and byte counts read in every line ftplat prints (progress, the dry-run plan,
``sweeps show``, the summary's cost line): one spelling, binary byte units. Imports nothing
heavy, so the CLI's read-only commands stay quick."""

from __future__ import annotations


def format_duration(seconds: float | None) -> str:
    """``45s``, ``3m07s``, ``2h05m``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def format_bytes(n: float) -> str:
    """``512 B``, ``2.9 MiB``, ``1.2 GiB``."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
