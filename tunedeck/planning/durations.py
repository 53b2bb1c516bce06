"""Durations as a rental reads them: days and hours for long ones, minutes for short ones."""

from __future__ import annotations


def rental_duration(seconds: float) -> str:
    """`2d 03h`, `5h 10m`, `12m`, `40s`."""
    whole = round(abs(seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m"
    return f"{secs}s"
