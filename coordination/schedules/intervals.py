"""Schedules of fixed intervals: :class:`Every` (slots every interval from the Unix epoch)
and :class:`WhenDue` (no slots: the job knows when it is due; a look at least every interval)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from coordination.schedules.base import (
    InvalidSchedule,
    Schedule,
    as_declared,
    check_limit,
    format_interval,
    format_seconds,
)
from coordination.schedules.calendar_edges import EPOCH, MICROSECOND, require_aware

MIN_INTERVAL = timedelta(seconds=1)


class Every(Schedule):
    """Run at a fixed interval, with slots anchored at the Unix epoch in UTC.

    Slot *k* is ``1970-01-01T00:00:00Z + k * interval``, so ``Every(timedelta(hours=1))``
    fires at the top of every UTC hour and every replica agrees on the slots no matter when
    it started. The interval must be at least one second; any whole number of microseconds
    is fine. Because slots are absolute UTC instants, daylight-saving changes do not affect
    this schedule (use :class:`Cron` for wall-clock times).
    """

    __slots__ = ("_interval", "_micros")

    def __init__(self, interval: timedelta) -> None:
        """Validate and store ``interval``."""
        if not isinstance(interval, timedelta):
            raise InvalidSchedule(
                f"every({interval!r}): interval must be a datetime.timedelta, "
                "e.g. every(timedelta(minutes=5))"
            )
        if interval < MIN_INTERVAL:
            raise InvalidSchedule(
                f"every({interval!r}): interval must be at least 1 second, "
                "e.g. every(timedelta(seconds=1))"
            )
        self._interval = interval
        self._micros = interval // MICROSECOND

    @property
    def interval(self) -> timedelta:
        """Return the interval between slots."""
        return self._interval

    def _index_floor(self, instant: datetime) -> int:
        """Return the index of the last slot at or before ``instant``."""
        return ((instant - EPOCH) // MICROSECOND) // self._micros

    def _index_ceil(self, instant: datetime) -> int:
        """Return the index of the first slot at or after ``instant``."""
        return -(-((instant - EPOCH) // MICROSECOND) // self._micros)  # ceiling division

    def _slot(self, index: int) -> datetime | None:
        """Return slot number ``index`` (0 is the epoch), or None past the calendar's end."""
        try:
            return EPOCH + timedelta(microseconds=index * self._micros)
        except OverflowError:
            return None

    def next_after(self, instant: datetime) -> datetime | None:
        """Return the first slot strictly after ``instant``, in UTC (None past the calendar)."""
        instant = require_aware(instant, "instant")
        return self._slot(self._index_floor(instant) + 1)

    def _slots_to_verify(self) -> int:
        """One: slots are arithmetic, so the first one fitting proves the rest compute."""
        return 1

    def _no_slot_message(self) -> str:
        return (
            f"every({as_declared(self._interval)}): no slot falls before the end of the calendar "
            "(9999-12-31): slots are "
            f"counted every {format_interval(self._interval)} from 1970-01-01 UTC, so the "
            "next one would come after it and the job would never run; use a shorter interval "
            "(cron('0 0 1 1 *') runs once a year)"
        )

    def slots_between(
        self, start: datetime, end: datetime, *, limit: int | None = None
    ) -> list[datetime]:
        """Return the slots in ``[start, end]`` (the last ``limit`` of them), by arithmetic.

        No iteration over skipped slots: an every-second schedule after a day of downtime
        costs ``limit`` steps, not 86,400.
        """
        start = require_aware(start, "start")
        end = require_aware(end, "end")
        check_limit(limit)
        if end < start or limit == 0:
            return []
        first = self._index_ceil(start)
        last = self._index_floor(end)
        if limit is not None:
            first = max(first, last - limit + 1)
        # Every index up to ``end``'s floor is a slot inside the calendar.
        return [self._slot(index) for index in range(first, last + 1)]

    def _slots_from(self, start: datetime) -> Iterator[datetime]:
        """Yield the slots at or after ``start`` by arithmetic, ascending, to the calendar's end."""
        index = self._index_ceil(start)
        while (slot := self._slot(index)) is not None:
            yield slot
            index += 1

    def describe(self) -> str:
        """Return text such as ``every 1h``, ``every 15 min`` or ``every 30s``."""
        return f"every {format_interval(self._interval)}"

    def fingerprint(self) -> str:
        """Return ``every:<seconds>``, e.g. ``every:3600.0``."""
        return f"every:{self._interval.total_seconds()!r}"

    def __repr__(self) -> str:
        return f"Every({self._interval!r})"


class WhenDue(Schedule):
    """Run whenever the job's own data says something is due; not slot based.

    The publish job, for example, knows from its queue when the next item is due. The
    schedule only provides a safety net: :meth:`next_after` returns ``instant + fallback``,
    so the job is looked at least every ``fallback`` even if nothing woke it. Such a
    schedule has no fixed slots, so :meth:`slots_between` is always empty.
    """

    __slots__ = ("_fallback",)
    periodic = False

    def __init__(self, fallback: timedelta = timedelta(seconds=60)) -> None:
        """Validate and store the at-least-every ``fallback``."""
        if not isinstance(fallback, timedelta):
            raise InvalidSchedule(
                f"WhenDue({fallback!r}): fallback must be a datetime.timedelta, "
                "e.g. WhenDue(timedelta(seconds=60))"
            )
        if fallback < MIN_INTERVAL:
            raise InvalidSchedule(f"WhenDue({fallback!r}): fallback must be at least 1 second")
        self._fallback = fallback

    @property
    def fallback(self) -> timedelta:
        """Return the longest time between two looks at the job."""
        return self._fallback

    def next_after(self, instant: datetime) -> datetime | None:
        """Return ``instant + fallback`` in UTC (the at-least-every safety net), or None past
        the end of the calendar."""
        instant = require_aware(instant, "instant")
        try:
            return instant + self._fallback
        except OverflowError:
            return None

    def slots_between(
        self, start: datetime, end: datetime, *, limit: int | None = None
    ) -> list[datetime]:
        """Return an empty list: a when-due schedule has no fixed slots."""
        start = require_aware(start, "start")
        end = require_aware(end, "end")
        check_limit(limit)
        return []

    def describe(self) -> str:
        """Return text such as ``when due (at least every 60s)``."""
        return f"when due (at least every {format_seconds(self._fallback)})"

    def fingerprint(self) -> str:
        """Return ``when_due:<seconds>``, e.g. ``when_due:60.0``."""
        return f"when_due:{self._fallback.total_seconds()!r}"

    def __repr__(self) -> str:
        return f"WhenDue({self._fallback!r})"
