"""Cron schedules: a 5-field expression evaluated in an IANA time zone by ``cronsim``, with
Debian cron's daylight-saving rules (see :class:`Cron`) and errors that say how to fix them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from coordination.schedules.base import InvalidSchedule, Schedule
from coordination.schedules.calendar_edges import MICROSECOND, require_aware

CRON_FIELDS = "minute hour day-of-month month day-of-week"
# Allowed values per cron field, used only to phrase cronsim's terse errors helpfully.
_CRON_FIELD_RANGES = {
    "minute": (0, 59, ""),
    "hour": (0, 23, ""),
    "day-of-month": (1, 31, ", L or LW, and the day must exist in the chosen months"),
    "month": (1, 12, " or JAN-DEC"),
    "day-of-week": (0, 7, " or SUN-SAT (0 and 7 are Sunday)"),
}


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
                f"({CRON_FIELDS}), e.g. '*/5 * * * *'"
            )
        fields = expression.split()
        normalized = " ".join(fields)
        if not fields:
            raise InvalidSchedule(
                f"cron {expression!r}: the expression is empty; expected 5 fields "
                f"({CRON_FIELDS}), e.g. '*/5 * * * *'"
            )
        if len(fields) != 5:
            hint = ""
            if len(fields) == 6:
                hint = "; a seconds field is not supported, every(timedelta(seconds=...)) is"
            elif normalized.startswith("@"):
                hint = "; macros like @daily are not supported, use daily() or hourly()"
            raise InvalidSchedule(
                f"cron {expression!r}: expected 5 fields ({CRON_FIELDS}), got {len(fields)}{hint}"
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
        instant = require_aware(instant, "instant")
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
        previous = start - MICROSECOND
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
