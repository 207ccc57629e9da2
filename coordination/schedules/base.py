"""What every schedule is: the :class:`Schedule` rule (an instant to the next slot after it),
its declaration-time check, and the error a bad declaration raises."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import datetime, timedelta

from coordination.schedules.calendar_edges import (
    FAR_END_PROBES,
    MICROSECOND,
    is_later,
    require_aware,
)

#: How many slots from the declaration's time :meth:`Schedule.verify` computes.
VERIFIED_SLOTS = 1000


class InvalidSchedule(ValueError):
    """A schedule declaration is invalid; the message says what is wrong and how to fix it."""


def as_declared(value: object) -> str:
    """Return ``value``'s repr as a plugin author writes it (``timedelta(days=2)``)."""
    return repr(value).replace("datetime.timedelta(", "timedelta(")


def check_limit(limit: int | None) -> None:
    """Raise unless ``limit`` is None or a non-negative int."""
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be None or a non-negative int, got {limit!r}")


def format_seconds(delta: timedelta) -> str:
    """Return ``delta`` as compact seconds text such as ``60s`` or ``1.5s``."""
    return f"{delta.total_seconds():g}s"


def format_interval(delta: timedelta) -> str:
    """Return ``delta`` in the largest whole unit: ``1d``, ``1h``, ``15 min`` or ``30s``."""
    micros = delta // MICROSECOND
    for unit_micros, suffix in ((86_400_000_000, "d"), (3_600_000_000, "h"), (60_000_000, " min")):
        if micros % unit_micros == 0:
            return f"{micros // unit_micros}{suffix}"
    return format_seconds(delta)


class Schedule(ABC):
    """When a job runs: a rule that maps any instant to the next slot after it.

    Subclasses implement :meth:`next_after`, :meth:`describe` and :meth:`fingerprint`.
    Two schedules are equal when their fingerprints are equal, i.e. when they mean the same
    thing, regardless of how they were declared (``daily(at="03:30")`` equals
    ``cron("30 3 * * *")``).
    """

    #: True for slot-based schedules (slots are fixed UTC instants every replica agrees on).
    periodic: bool = True

    @abstractmethod
    def next_after(self, instant: datetime) -> datetime | None:
        """Return the first slot strictly after ``instant``, in UTC, or ``None`` when the
        calendar holds no slot after it.

        ``instant`` must be timezone-aware (any zone); naive input raises ``ValueError``.
        """

    @abstractmethod
    def describe(self) -> str:
        """Return a short human description such as ``every 1h`` or ``daily at 03:30 (UTC)``."""

    @abstractmethod
    def fingerprint(self) -> str:
        """Return a stable string identifying what the schedule means.

        Equal schedules give equal fingerprints; a deploy that changes a job's schedule
        changes its fingerprint.
        """

    def verify(self, *, now: datetime) -> None:
        """Raise :class:`InvalidSchedule` unless the slots can be computed wherever a
        scheduler may ask: the first :data:`VERIFIED_SLOTS` slots after ``now`` (the first of
        them must exist) and the next slot at the far end of the calendar, each a later
        instant or ``None``.

        A job declaration calls it, so a schedule that would raise (an overflow, a bug in a
        custom schedule) is one declaration error instead of a job that breaks its group's
        planning. The message names the schedule, what went wrong and how to fix it.
        """
        now = require_aware(now, "now")
        slot = self._verified_next_after(now)
        if slot is None:
            raise InvalidSchedule(self._no_slot_message())
        for _ in range(self._slots_to_verify() - 1):
            slot = self._verified_next_after(slot)
            if slot is None:
                break
        for probe in FAR_END_PROBES:
            self._verified_next_after(probe)

    def _slots_to_verify(self) -> int:
        """Return how many slots after the declaration's time :meth:`verify` walks."""
        return VERIFIED_SLOTS

    def _no_slot_message(self) -> str:
        """Return the declaration error for a schedule with no slot left in the calendar."""
        return (
            f"{as_declared(self)}: no slot falls before the end of the calendar (9999-12-31), so "
            "the job would never run; choose a schedule with a next slot"
        )

    def _verified_next_after(self, instant: datetime) -> datetime | None:
        """Return ``next_after(instant)``; raise InvalidSchedule if it raises or goes back."""
        try:
            slot = self.next_after(instant)
        except Exception as exc:
            raise InvalidSchedule(
                f"{self.describe()}: computing its slots failed ({type(exc).__name__}: {exc}, "
                f"after {instant.isoformat()}); next_after() must return a later instant or "
                "None at the end of the calendar"
            ) from None
        if slot is not None and not (isinstance(slot, datetime) and is_later(slot, instant)):
            raise InvalidSchedule(
                f"{self.describe()}: next_after({instant.isoformat()}) returned {slot!r}, not a "
                "later instant (or None at the end of the calendar)"
            )
        return slot

    def slots_between(
        self, start: datetime, end: datetime, *, limit: int | None = None
    ) -> list[datetime]:
        """Return the slots ``s`` with ``start <= s <= end`` in ascending order.

        With ``limit``, return at most that many: the *last* ``limit`` slots of the range
        (the most recent ones). The search for them widens a window backwards from ``end``,
        so the cost stays proportional to ``limit`` even after a long outage. That relies on
        slots not depending on where the search starts, which holds for every periodic
        schedule.
        """
        start = require_aware(start, "start")
        end = require_aware(end, "end")
        check_limit(limit)
        if end < start or limit == 0:
            return []
        if limit is None:
            return self._slots_in(start, end)
        window = timedelta(minutes=limit + 1)
        while True:
            low = start if window >= end - start else end - window
            slots = self._slots_in(low, end)
            if len(slots) >= limit or low == start:
                return slots[-limit:]
            window *= 8

    def iter_slots(self, start: datetime, before: datetime) -> Iterator[datetime]:
        """Yield the slots ``s`` with ``start <= s < before``, ascending, one at a time.

        Lazy, because a long outage of a frequent job spans millions of slots that are recorded
        in batches rather than held in memory at once.
        """
        start = require_aware(start, "start")
        before = require_aware(before, "before")
        for slot in self._slots_from(start):
            if slot >= before:
                return
            yield slot

    def _slots_in(self, start: datetime, end: datetime) -> list[datetime]:
        """Return every slot in ``[start, end]``, ascending."""
        slots = []
        for slot in self._slots_from(start):
            if slot > end:
                break
            slots.append(slot)
        return slots

    def _slots_from(self, start: datetime) -> Iterator[datetime]:
        """Yield the slots at or after ``start``, ascending, to the end of the calendar."""
        slot = self.next_after(start - MICROSECOND)
        while slot is not None:
            yield slot
            slot = self.next_after(slot)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        return self.fingerprint() == other.fingerprint()

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def __str__(self) -> str:
        return self.describe()
