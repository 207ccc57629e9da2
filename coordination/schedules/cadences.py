"""The cadence helpers plugin authors declare schedules with (:func:`every`,
:func:`every_minutes`, :func:`hourly`, :func:`daily`, :func:`weekly`, :func:`monthly`,
:func:`cron`), each checking its arguments, and :func:`coerce` (a bare ``timedelta`` is an
:class:`Every`)."""

from __future__ import annotations

import re
from datetime import timedelta

from coordination.schedules.base import InvalidSchedule, Schedule
from coordination.schedules.crontab import Cron
from coordination.schedules.intervals import Every

_MAX_EVERY_MINUTES = 1440

_HELPERS_HINT = (
    "use every(timedelta(...)), cron('...'), hourly(), daily(at='HH:MM'), weekly(...), "
    "monthly(...) or every_minutes(n)"
)
_HHMM = re.compile(r"(\d{1,2}):(\d{2})")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


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
