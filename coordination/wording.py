"""The words people read for the scheduler's values: durations, lateness, times, schedulers.

One place for each, so the admin pages, the timeline and the operators' commands say the same
thing the same way: ``6 ms``, ``3.2 s``, ``4 min 10 s`` rather than ``0.006441874999950414``;
``on time`` for a run less than a second late; every time with its zone's name; and a
scheduler process as ``Scheduler (node web-1:4242)`` rather than a bare node name. Each is a
pure function of its value (and, for times, a zone), tested with tables.
"""

import re
from datetime import datetime, tzinfo

from django.utils import timezone

#: What a value that is not there reads as.
NONE = "—"
#: Runs that start less than this many seconds after their slot read ``on time``.
ON_TIME_WITHIN = 1.0

_MINUTE, _HOUR, _DAY = 60, 3600, 86400


def duration_text(seconds: float | None) -> str:
    """Return a duration in words: ``6 ms``, ``3.2 s``, ``42 s``, ``4 min 10 s``, ``2 h 5 min``.

    Precision falls as the value grows (milliseconds under a second, tenths under ten
    seconds, then whole seconds, minutes, hours), so a number never has more than two parts.
    A negative value (clocks of two machines) reads as zero; ``None`` as :data:`NONE`.
    """
    if seconds is None:
        return NONE
    seconds = max(float(seconds), 0.0)
    millis = round(seconds * 1000)
    if millis < 1:
        return "under 1 ms" if seconds > 0 else "0 ms"
    if millis < 1000:
        return f"{millis} ms"
    tenths = round(seconds * 10)
    if tenths < 100:
        return f"{tenths / 10:.1f} s"
    whole = round(seconds)
    if whole < _MINUTE:
        return f"{whole} s"
    if whole < _HOUR:
        return _two_parts(whole // _MINUTE, "min", whole % _MINUTE, "s")
    minutes = round(seconds / _MINUTE)
    if minutes < 24 * 60:
        return _two_parts(minutes // 60, "h", minutes % 60, "min")
    hours = round(seconds / _HOUR)
    return _two_parts(hours // 24, "d", hours % 24, "h")


def _two_parts(big: int, big_unit: str, small: int, small_unit: str) -> str:
    return f"{big} {big_unit} {small} {small_unit}" if small else f"{big} {big_unit}"


def lateness_text(seconds: float | None) -> str:
    """Return how late a run started in words: ``on time`` (under a second), ``3.2 s late``.

    A run that started before its slot (a manual run) is on time too; ``None`` (never
    started) reads as :data:`NONE`.
    """
    if seconds is None:
        return NONE
    if seconds < ON_TIME_WITHIN:
        return "on time"
    return f"{duration_text(seconds)} late"


def local_time(
    instant: datetime | None, zone: tzinfo | None = None, *, seconds: bool = True
) -> str:
    """Return ``instant`` as ``2026-12-01 23:00:00 CET`` in ``zone`` (default: the current
    zone, the editor's in the admin), always with the zone's name; ``None`` as :data:`NONE`.

    ``seconds=False`` gives ``2026-12-01 23:00 CET``, for narrow list columns. Formatted
    directly rather than by ``date_format``: admin lists show hundreds of times a page, and
    this is a tenth of the cost for the same text.
    """
    if instant is None:
        return NONE
    local = timezone.localtime(instant, zone)
    clock = f"{local:%H:%M:%S}" if seconds else f"{local:%H:%M}"
    return f"{local.year:04d}-{local:%m-%d} {clock} {local.tzname() or ''}".rstrip()


#: How a worker process's node is named (``coordination.workers.meeting.worker_node_name``,
#: and ``<node>/tasks`` for another tasks backend's worker).
_WORKER_NAME = re.compile(r"/(worker-\d+|tasks)$")


def scheduler_text(node: str | None) -> str:
    """Return the words for the process named ``node``: ``Scheduler (node web-1)``, or
    ``Worker (node web-1/worker-1)`` for a worker process, which schedules nothing."""
    if not node:
        return NONE
    if _WORKER_NAME.search(node):
        return f"Worker (node {node})"
    return f"Scheduler (node {node})"
