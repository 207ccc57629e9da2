"""Moments in the words the publishing admin shows editors: ``Tue 2 Dec, 05:01 JST``.

Pure functions of datetimes. Durations and lateness come from :mod:`coordination.wording`,
so every admin page says "6 ms", "3.2 s", "4 min 10 s" and "on time" the same way.
"""

from datetime import datetime, tzinfo

from coordination.wording import ON_TIME_WITHIN, duration_text


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
    if abs(seconds) < ON_TIME_WITHIN:
        return "now"
    words = duration_text(abs(seconds))
    return f"in {words}" if seconds > 0 else f"{words} ago"
