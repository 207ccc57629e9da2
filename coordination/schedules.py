"""Schedule types that periodic jobs declare.

A schedule answers one question: given an instant, when is the next *slot*? Slots are
absolute UTC instants derived only from the schedule itself, never from the clock of the
replica asking or from when it happened to start. Every replica therefore computes the
same slots, and a slot can serve as the key that makes a run happen exactly once across
replicas (the first replica to claim a slot runs it; the others see it is taken).

Runs never drift: the slot after a run is ``schedule.next_after(slot)``, not
``finish_time + interval``. A job that takes 40 seconds on an ``every(timedelta(hours=1))``
schedule still starts at the top of every hour rather than creeping forward by 40 seconds
per run.

Three kinds of schedule exist:

* :class:`Every` - a fixed interval, with slots anchored at the Unix epoch in UTC.
* :class:`Cron` - a classic 5-field cron expression evaluated in an IANA time zone (via
  ``cronsim``, which follows Debian cron's daylight-saving rules; see the class docstring).
* :class:`WhenDue` - not slot based: the job itself knows when work is due and the schedule
  only guarantees it is looked at least every ``fallback``.

Plugin authors normally use the cadence helpers (:func:`every`, :func:`every_minutes`,
:func:`hourly`, :func:`daily`, :func:`weekly`, :func:`monthly`, :func:`cron`), and
:func:`coerce` turns a bare ``timedelta`` into an :class:`Every`. All validation happens at
declaration time and raises :class:`InvalidSchedule` with a message that says what is wrong
and how to fix it: the helpers check their arguments, and :meth:`Schedule.verify` (called by
every job declaration) computes the first thousand slots and the slots at the far end of the
calendar, so a schedule that is accepted never raises while a scheduler plans it.

The calendar is Python's: 0001-01-01 to 9999-12-31 UTC (:data:`CALENDAR_END`). A schedule
has no slot after the last one that fits: :meth:`Schedule.next_after` returns ``None`` there
(and a local wall-clock time that falls outside the calendar is no slot), so a job at the end
of the calendar simply has no next slot.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

__all__ = [
    "CALENDAR_END",
    "Cron",
    "Every",
    "InvalidSchedule",
    "Schedule",
    "WhenDue",
    "coerce",
    "cron",
    "daily",
    "every",
    "every_minutes",
    "hourly",
    "monthly",
    "weekly",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The last instant Python's calendar holds; no slot lies after it.
CALENDAR_END = datetime.max.replace(tzinfo=UTC)
#: How many slots from the declaration's time :meth:`Schedule.verify` computes.
VERIFIED_SLOTS = 1000
#: Instants at the far end of the calendar that :meth:`Schedule.verify` asks for a next slot.
_FAR_END_PROBES = (
    datetime(9999, 12, 30, 12, tzinfo=UTC),
    datetime(9999, 12, 31, 12, tzinfo=UTC),
    CALENDAR_END - timedelta(minutes=1),
    CALENDAR_END,
)
_MICROSECOND = timedelta(microseconds=1)
_MIN_INTERVAL = timedelta(seconds=1)
_MAX_EVERY_MINUTES = 1440

_HELPERS_HINT = (
    "use every(timedelta(...)), cron('...'), hourly(), daily(at='HH:MM'), weekly(...), "
    "monthly(...) or every_minutes(n)"
)
_CRON_FIELDS = "minute hour day-of-month month day-of-week"
# Allowed values per cron field, used only to phrase cronsim's terse errors helpfully.
_CRON_FIELD_RANGES = {
    "minute": (0, 59, ""),
    "hour": (0, 23, ""),
    "day-of-month": (1, 31, ", L or LW, and the day must exist in the chosen months"),
    "month": (1, 12, " or JAN-DEC"),
    "day-of-week": (0, 7, " or SUN-SAT (0 and 7 are Sunday)"),
}
_HHMM = re.compile(r"(\d{1,2}):(\d{2})")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


class InvalidSchedule(ValueError):
    """A schedule declaration is invalid; the message says what is wrong and how to fix it."""


def _require_aware(value: datetime, name: str) -> datetime:
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


def _declared(value: object) -> str:
    """Return ``value``'s repr as a plugin author writes it (``timedelta(days=2)``)."""
    return repr(value).replace("datetime.timedelta(", "timedelta(")


def _is_later(slot: datetime, instant: datetime) -> bool:
    """Return True when ``slot`` is an aware datetime after ``instant``."""
    return slot.tzinfo is not None and slot.utcoffset() is not None and slot > instant


def _check_limit(limit: int | None) -> None:
    """Raise unless ``limit`` is None or a non-negative int."""
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be None or a non-negative int, got {limit!r}")


def _format_seconds(delta: timedelta) -> str:
    """Return ``delta`` as compact seconds text such as ``60s`` or ``1.5s``."""
    return f"{delta.total_seconds():g}s"


def _format_interval(delta: timedelta) -> str:
    """Return ``delta`` in the largest whole unit: ``1d``, ``1h``, ``15 min`` or ``30s``."""
    micros = delta // _MICROSECOND
    for unit_micros, suffix in ((86_400_000_000, "d"), (3_600_000_000, "h"), (60_000_000, " min")):
        if micros % unit_micros == 0:
            return f"{micros // unit_micros}{suffix}"
    return _format_seconds(delta)


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
        now = _require_aware(now, "now")
        slot = self._verified_next_after(now)
        if slot is None:
            raise InvalidSchedule(self._no_slot_message())
        for _ in range(self._slots_to_verify() - 1):
            slot = self._verified_next_after(slot)
            if slot is None:
                break
        for probe in _FAR_END_PROBES:
            self._verified_next_after(probe)

    def _slots_to_verify(self) -> int:
        """Return how many slots after the declaration's time :meth:`verify` walks."""
        return VERIFIED_SLOTS

    def _no_slot_message(self) -> str:
        """Return the declaration error for a schedule with no slot left in the calendar."""
        return (
            f"{_declared(self)}: no slot falls before the end of the calendar (9999-12-31), so "
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
        if slot is not None and not (isinstance(slot, datetime) and _is_later(slot, instant)):
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
        start = _require_aware(start, "start")
        end = _require_aware(end, "end")
        _check_limit(limit)
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
        start = _require_aware(start, "start")
        before = _require_aware(before, "before")
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
        slot = self.next_after(start - _MICROSECOND)
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
        if interval < _MIN_INTERVAL:
            raise InvalidSchedule(
                f"every({interval!r}): interval must be at least 1 second, "
                "e.g. every(timedelta(seconds=1))"
            )
        self._interval = interval
        self._micros = interval // _MICROSECOND

    @property
    def interval(self) -> timedelta:
        """Return the interval between slots."""
        return self._interval

    def _index_floor(self, instant: datetime) -> int:
        """Return the index of the last slot at or before ``instant``."""
        return ((instant - EPOCH) // _MICROSECOND) // self._micros

    def _index_ceil(self, instant: datetime) -> int:
        """Return the index of the first slot at or after ``instant``."""
        return -(-((instant - EPOCH) // _MICROSECOND) // self._micros)  # ceiling division

    def _slot(self, index: int) -> datetime | None:
        """Return slot number ``index`` (0 is the epoch), or None past the calendar's end."""
        try:
            return EPOCH + timedelta(microseconds=index * self._micros)
        except OverflowError:
            return None

    def next_after(self, instant: datetime) -> datetime | None:
        """Return the first slot strictly after ``instant``, in UTC (None past the calendar)."""
        instant = _require_aware(instant, "instant")
        return self._slot(self._index_floor(instant) + 1)

    def _slots_to_verify(self) -> int:
        """One: slots are arithmetic, so the first one fitting proves the rest compute."""
        return 1

    def _no_slot_message(self) -> str:
        return (
            f"every({_declared(self._interval)}): no slot falls before the end of the calendar "
            "(9999-12-31): slots are "
            f"counted every {_format_interval(self._interval)} from 1970-01-01 UTC, so the "
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
        start = _require_aware(start, "start")
        end = _require_aware(end, "end")
        _check_limit(limit)
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
        return f"every {_format_interval(self._interval)}"

    def fingerprint(self) -> str:
        """Return ``every:<seconds>``, e.g. ``every:3600.0``."""
        return f"every:{self._interval.total_seconds()!r}"

    def __repr__(self) -> str:
        return f"Every({self._interval!r})"


def _zone(tz: str) -> ZoneInfo:
    """Return the ZoneInfo for ``tz`` or raise InvalidSchedule."""
    if not isinstance(tz, str) or not tz:
        raise InvalidSchedule(f"unknown time zone {tz!r}: use an IANA name such as 'Europe/Berlin'")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(
            f"unknown time zone {tz!r}: use an IANA name such as 'Europe/Berlin'"
        ) from None


def _explain_cron_error(expression: str, fields: list[str], error: CronSimError) -> str:
    """Turn cronsim's terse error (e.g. ``Bad minute``) into a message that helps fix it."""
    message = str(error)
    field = message.removeprefix("Bad ").strip()
    if field not in _CRON_FIELD_RANGES:
        return f"cron {expression!r}: {message}"
    low, high, extra = _CRON_FIELD_RANGES[field]
    token = fields[list(_CRON_FIELD_RANGES).index(field)]
    allowed = f"allowed values are {low}-{high}{extra}"
    if token.isdigit() and not low <= int(token) <= high:
        return f"cron {expression!r}: {field} field value {token} is out of range {low}-{high}"
    return f"cron {expression!r}: {field} field {token!r} is invalid ({message}); {allowed}"


class Cron(Schedule):
    """Run at the times a 5-field cron expression matches, in an IANA time zone.

    Fields are ``minute hour day-of-month month day-of-week``; seconds (6 fields) and
    macros such as ``@daily`` are not supported. Evaluation is done by ``cronsim``, which
    follows Debian cron; in particular, when both day-of-month and day-of-week are
    restricted (neither starts with ``*``) a day matching *either* field matches.

    Slots are the UTC instants of the matching local wall-clock times. Daylight saving
    time is handled like Debian cron, and the behaviour depends on whether the minute and
    hour fields are both fixed:

    * **Fixed minute and hour** (neither field starts with ``*``; e.g. ``30 2 * * *``, and
      everything built by :func:`daily`, :func:`weekly` and :func:`monthly`):

      - *Spring forward* (a skipped hour): a slot whose wall-clock time does not exist runs
        once, right after the jump. ``30 2 * * *`` in Europe/Berlin on 2026-03-29 runs at
        03:00 CEST (01:00 UTC); slots that collapse onto the same instant (``0,30 2 * * *``)
        run once.
      - *Fall back* (a repeated hour): a slot in the repeated hour runs once, in the first
        pass (the earlier UTC instant). ``30 2 * * *`` in Europe/Berlin on 2026-10-25 runs
        at 02:30 CEST (00:30 UTC) only.

    * **Wildcard minute or hour** (either field starts with ``*``; e.g. ``*/15 * * * *``,
      ``0 * * * *``, ``*/15 2 * * *``, and everything built by :func:`hourly`): the
      schedule follows real elapsed time.

      - *Spring forward*: wall-clock times in the skipped hour simply do not occur, so
        ``0 * * * *`` goes from 01:00 to 03:00 local (still one hour apart in UTC) and
        ``*/15 2 * * *`` does not run at all that day.
      - *Fall back*: the repeated hour is run in both passes, so ``0 * * * *`` runs at
        02:00 CEST and again at 02:00 CET (one hour apart in UTC), and ``*/15 2 * * *``
        runs eight times.

    In every case :meth:`next_after` returns strictly increasing UTC instants with no
    duplicates.
    """

    __slots__ = ("_expression", "_fields", "_label", "_tz", "_zone")

    def __init__(self, expression: str, tz: str = "UTC", *, label: str | None = None) -> None:
        """Validate ``expression`` and ``tz``; ``label`` overrides :meth:`describe`."""
        if not isinstance(expression, str):
            raise InvalidSchedule(
                f"cron({expression!r}): the expression must be a string of 5 fields "
                f"({_CRON_FIELDS}), e.g. '*/5 * * * *'"
            )
        fields = expression.split()
        normalized = " ".join(fields)
        if not fields:
            raise InvalidSchedule(
                f"cron {expression!r}: the expression is empty; expected 5 fields "
                f"({_CRON_FIELDS}), e.g. '*/5 * * * *'"
            )
        if len(fields) != 5:
            hint = ""
            if len(fields) == 6:
                hint = "; a seconds field is not supported, every(timedelta(seconds=...)) is"
            elif normalized.startswith("@"):
                hint = "; macros like @daily are not supported, use daily() or hourly()"
            raise InvalidSchedule(
                f"cron {expression!r}: expected 5 fields ({_CRON_FIELDS}), got {len(fields)}{hint}"
            )
        zone = _zone(tz)
        probe_start = datetime(2000, 1, 1, tzinfo=zone)
        try:
            next(CronSim(normalized, probe_start))
        except CronSimError as error:
            raise InvalidSchedule(_explain_cron_error(expression, fields, error)) from None
        except StopIteration:
            raise InvalidSchedule(
                f"cron {expression!r}: the expression never matches a real date"
            ) from None
        self._expression = normalized
        self._fields = fields
        self._tz = tz
        self._zone = zone
        self._label = label

    @property
    def expression(self) -> str:
        """Return the cron expression (whitespace normalised)."""
        return self._expression

    @property
    def tz(self) -> str:
        """Return the IANA time zone name the expression is evaluated in."""
        return self._tz

    @property
    def label(self) -> str | None:
        """Return the human label given by a cadence helper, if any."""
        return self._label

    def _candidates(self, instant: datetime) -> Iterator[datetime]:
        """Yield cronsim's matches after ``instant``'s local wall-clock time, in UTC, up to
        the end of the calendar.

        cronsim drops the ``fold`` of the start time for fixed-time expressions, so when
        ``instant`` is in the second pass of a repeated hour the first candidates can lie
        before ``instant``; callers filter them out. At the ends of the calendar a local time
        may not fit (before 0001-01-01 or after 9999-12-31 in either the zone or UTC): the
        search starts at the zone's first representable minute, skips matches that have no
        UTC instant, and ends where cronsim's arithmetic leaves the calendar. cronsim also
        gives up after 50 years without a match, which an accepted expression only reaches
        at the end of the calendar.
        """
        try:
            start = instant.astimezone(self._zone)
        except OverflowError:
            if instant.year > 1:
                return
            start = datetime.min.replace(tzinfo=self._zone)
        try:
            for local in CronSim(self._expression, start):
                try:
                    yield local.astimezone(UTC)
                except OverflowError:
                    if local.year > 1:
                        return
        except OverflowError:
            return

    def next_after(self, instant: datetime) -> datetime | None:
        """Return the first slot strictly after ``instant``, in UTC (None past the calendar)."""
        instant = _require_aware(instant, "instant")
        for candidate in self._candidates(instant):
            if candidate > instant:
                return candidate
        return None

    def _slots_to_verify(self) -> int:
        """One: cronsim computes every date the same way, so what can go wrong lies at the
        ends of the calendar (the far-end probes); walking a thousand cron slots would cost
        each process start 50-300 ms per job."""
        return 1

    def _slots_from(self, start: datetime) -> Iterator[datetime]:
        """Yield the slots at or after ``start`` from a single cronsim iterator."""
        previous = start - _MICROSECOND
        for candidate in self._candidates(previous):
            if candidate > previous:
                yield candidate
                previous = candidate

    def describe(self) -> str:
        """Return the helper's label, or text such as ``cron '*/5 * * * *' (UTC)``."""
        if self._label:
            return self._label
        return f"cron {self._expression!r} ({self._tz})"

    def fingerprint(self) -> str:
        """Return ``cron:<expression>@<tz>``, e.g. ``cron:30 3 * * *@Europe/Berlin``."""
        return f"cron:{self._expression.upper()}@{self._tz}"

    def __repr__(self) -> str:
        label = f", label={self._label!r}" if self._label else ""
        return f"Cron({self._expression!r}, tz={self._tz!r}{label})"


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
        if fallback < _MIN_INTERVAL:
            raise InvalidSchedule(f"WhenDue({fallback!r}): fallback must be at least 1 second")
        self._fallback = fallback

    @property
    def fallback(self) -> timedelta:
        """Return the longest time between two looks at the job."""
        return self._fallback

    def next_after(self, instant: datetime) -> datetime | None:
        """Return ``instant + fallback`` in UTC (the at-least-every safety net), or None past
        the end of the calendar."""
        instant = _require_aware(instant, "instant")
        try:
            return instant + self._fallback
        except OverflowError:
            return None

    def slots_between(
        self, start: datetime, end: datetime, *, limit: int | None = None
    ) -> list[datetime]:
        """Return an empty list: a when-due schedule has no fixed slots."""
        start = _require_aware(start, "start")
        end = _require_aware(end, "end")
        _check_limit(limit)
        return []

    def describe(self) -> str:
        """Return text such as ``when due (at least every 60s)``."""
        return f"when due (at least every {_format_seconds(self._fallback)})"

    def fingerprint(self) -> str:
        """Return ``when_due:<seconds>``, e.g. ``when_due:60.0``."""
        return f"when_due:{self._fallback.total_seconds()!r}"

    def __repr__(self) -> str:
        return f"WhenDue({self._fallback!r})"


# Cadence helpers ------------------------------------------------------------------------


def _parse_hhmm(at: str, call: str) -> tuple[int, int]:
    """Return ``(hour, minute)`` from ``"HH:MM"`` or raise InvalidSchedule naming ``call``."""
    match = _HHMM.fullmatch(at) if isinstance(at, str) else None
    if match:
        hour, minute = int(match.group(1)), int(match.group(2))
        if hour <= 23 and minute <= 59:
            return hour, minute
    raise InvalidSchedule(f"{call}: time must be HH:MM (00:00-23:59)")


def every(interval: timedelta) -> Every:
    """Return a schedule that runs every ``interval``, anchored at the Unix epoch in UTC."""
    return Every(interval)


def every_minutes(n: int) -> Every:
    """Return a schedule that runs every ``n`` minutes (1 to 1440)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidSchedule(
            f"every_minutes({n!r}): n must be a whole number of minutes (int) "
            f"between 1 and {_MAX_EVERY_MINUTES}; use every(timedelta(...)) for other intervals"
        )
    if not 1 <= n <= _MAX_EVERY_MINUTES:
        raise InvalidSchedule(
            f"every_minutes({n}): n must be between 1 and {_MAX_EVERY_MINUTES} minutes"
        )
    return Every(timedelta(minutes=n))


def hourly(minute: int = 0, tz: str = "UTC") -> Cron:
    """Return a schedule that runs every hour at ``minute`` past the hour in ``tz``."""
    if isinstance(minute, bool) or not isinstance(minute, int) or not 0 <= minute <= 59:
        raise InvalidSchedule(f"hourly(minute={minute!r}): minute must be an int from 0 to 59")
    return Cron(f"{minute} * * * *", tz, label=f"hourly at :{minute:02d} ({tz})")


def daily(at: str = "00:00", tz: str = "UTC") -> Cron:
    """Return a schedule that runs every day at ``at`` (``"HH:MM"``) local time in ``tz``."""
    hour, minute = _parse_hhmm(at, f"daily(at={at!r})")
    return Cron(f"{minute} {hour} * * *", tz, label=f"daily at {hour:02d}:{minute:02d} ({tz})")


def weekly(weekday: str | int, at: str = "00:00", tz: str = "UTC") -> Cron:
    """Return a schedule that runs every week on ``weekday`` at ``at`` local time in ``tz``.

    ``weekday`` is a name (``"monday"``, ``"Mon"``, ...; case-insensitive) or an int like
    :meth:`datetime.date.weekday` (0 is Monday, 6 is Sunday).
    """
    call = f"weekly({weekday!r}, at={at!r})"
    index: int | None = None
    if isinstance(weekday, str):
        name = weekday.strip().lower()
        for position, full in enumerate(_WEEKDAYS):
            if name in (full, full[:3]):
                index = position
    elif isinstance(weekday, int) and not isinstance(weekday, bool) and 0 <= weekday <= 6:
        index = weekday
    if index is None:
        raise InvalidSchedule(
            f"{call}: weekday must be a day name such as 'monday' or 'mon', "
            "or an int from 0 (Monday) to 6 (Sunday)"
        )
    hour, minute = _parse_hhmm(at, call)
    cron_weekday = (index + 1) % 7  # cron counts from Sunday = 0; Python from Monday = 0
    label = f"weekly on {_WEEKDAYS[index].capitalize()} at {hour:02d}:{minute:02d} ({tz})"
    return Cron(f"{minute} {hour} * * {cron_weekday}", tz, label=label)


def monthly(day: int, at: str = "00:00", tz: str = "UTC") -> Cron:
    """Return a schedule that runs every month on ``day`` (1 to 28) at ``at`` local time."""
    call = f"monthly(day={day!r}, at={at!r})"
    if isinstance(day, bool) or not isinstance(day, int) or not 1 <= day <= 28:
        raise InvalidSchedule(
            f"{call}: day must be an int from 1 to 28, because days 29-31 do not exist in "
            "every month; for the last day of the month use cron('0 0 L * *')"
        )
    hour, minute = _parse_hhmm(at, call)
    label = f"monthly on day {day} at {hour:02d}:{minute:02d} ({tz})"
    return Cron(f"{minute} {hour} {day} * *", tz, label=label)


def cron(expression: str, tz: str = "UTC") -> Cron:
    """Return a schedule for a 5-field cron ``expression`` evaluated in ``tz``."""
    return Cron(expression, tz)


def coerce(value: object) -> Schedule:
    """Return ``value`` as a Schedule: a Schedule as is, a ``timedelta`` as :class:`Every`."""
    if isinstance(value, Schedule):
        return value
    if isinstance(value, timedelta):
        return Every(value)
    raise InvalidSchedule(f"{value!r} is not a schedule: {_HELPERS_HINT}")
