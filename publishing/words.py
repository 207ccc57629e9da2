"""Durations, lateness and moments in the words the publishing admin shows editors.

Pure functions of numbers and datetimes, so that every publishing admin page says "6 ms",
"3.2 s", "4 min 10 s" and "on time" the same way.
"""

from datetime import datetime, tzinfo

#: Lateness below this reads "on time": a publish a few milliseconds after its second is.
ON_TIME_SECONDS = 1.0

#: From a minute up: the unit, its size in seconds, and the smaller unit shown with it.
UNITS = (("d", 86400, "h", 3600), ("h", 3600, "min", 60), ("min", 60, "s", 1))


def duration_text(seconds: float) -> str:
    """Return a duration in words: ``6 ms``, ``3.2 s``, ``42 s``, ``4 min 10 s``, ``3 h 12 min``.

    Two units at most, the smaller one dropped when it is zero; a negative duration reads
    as its size.
    """
    seconds = abs(seconds)
    if seconds < 1:
        return f"{round(seconds * 1000)} ms" if seconds < 0.9995 else "1.0 s"
    if seconds < 10:
        return f"{seconds:.1f} s" if round(seconds, 1) < 10 else "10 s"
    whole = int(seconds)
    for unit, size, small_unit, small_size in UNITS:
        if whole >= size:
            big, rest = divmod(whole, size)
            small = rest // small_size
            return f"{big} {unit} {small} {small_unit}" if small else f"{big} {unit}"
    return f"{whole} s"


def lateness_text(seconds: float | None) -> str:
    """Return a lateness in words: ``on time`` under a second, else ``3.2 s late``; ``""``
    when there is none (published by hand)."""
    if seconds is None:
        return ""
    if seconds < ON_TIME_SECONDS:
        return "on time"
    return f"{duration_text(seconds)} late"


def moment_text(value: datetime, zone: tzinfo, now: datetime) -> str:
    """Return ``value`` as an editor reads it in ``zone``: ``Tue 2 Dec, 05:01 JST``.

    The year is added when it is not ``now``'s year in ``zone``.
    """
    local = value.astimezone(zone)
    year = "" if local.year == now.astimezone(zone).year else f" {local.year}"
    return f"{local:%a} {local.day} {local:%b}{year}, {local:%H:%M} {local.tzname()}"


def relative_text(value: datetime, now: datetime) -> str:
    """Return how far ``value`` is from ``now``: ``in 3 h 12 min``, ``4 min ago``, ``now``."""
    seconds = (value - now).total_seconds()
    if abs(seconds) < ON_TIME_SECONDS:
        return "now"
    words = duration_text(abs(seconds))
    return f"in {words}" if seconds > 0 else f"{words} ago"
