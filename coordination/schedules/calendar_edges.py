"""The edges of the calendar schedules compute in, and the instants they accept.

The calendar is Python's: 0001-01-01 to 9999-12-31 UTC (:data:`CALENDAR_END`). A schedule has
no slot after the last one that fits: ``Schedule.next_after`` returns ``None`` there (and a
local wall-clock time that falls outside the calendar is no slot), so a job at the end of the
calendar simply has no next slot. ``Schedule.verify`` asks for the next slot at the far end
(:data:`FAR_END_PROBES`), so a schedule that would overflow there is refused when declared.
"""

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The last instant Python's calendar holds; no slot lies after it.
CALENDAR_END = datetime.max.replace(tzinfo=UTC)
#: Instants at the far end of the calendar that ``Schedule.verify`` asks for a next slot.
FAR_END_PROBES = (
    datetime(9999, 12, 30, 12, tzinfo=UTC),
    datetime(9999, 12, 31, 12, tzinfo=UTC),
    CALENDAR_END - timedelta(minutes=1),
    CALENDAR_END,
)
MICROSECOND = timedelta(microseconds=1)


def require_aware(value: datetime, name: str) -> datetime:
    """Return ``value`` converted to UTC; raise unless it is a timezone-aware datetime.

    Converting first keeps comparisons exact: Python never considers a ``fold=1`` local
    time equal to an instant in another zone, even when they denote the same instant.
    """
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a timezone-aware datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{name} must be timezone-aware, got naive {value!r}; "
            "use django.utils.timezone.now() or datetime.now(timezone.utc)"
        )
    return value.astimezone(UTC)


def is_later(slot: datetime, instant: datetime) -> bool:
    """Return True when ``slot`` is an aware datetime after ``instant``."""
    return slot.tzinfo is not None and slot.utcoffset() is not None and slot > instant
