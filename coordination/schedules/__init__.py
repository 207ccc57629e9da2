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

The package splits by concern: ``base`` (the :class:`Schedule` rule and its check),
``calendar_edges`` (the calendar's ends and the instants accepted), ``intervals``
(:class:`Every`, :class:`WhenDue`), ``crontab`` (:class:`Cron`) and ``cadences`` (the helpers).
"""

from coordination.schedules.base import VERIFIED_SLOTS, InvalidSchedule, Schedule
from coordination.schedules.cadences import (
    coerce,
    cron,
    daily,
    every,
    every_minutes,
    hourly,
    monthly,
    weekly,
)
from coordination.schedules.calendar_edges import CALENDAR_END, EPOCH
from coordination.schedules.crontab import Cron
from coordination.schedules.intervals import Every, WhenDue

__all__ = [
    "CALENDAR_END",
    "EPOCH",
    "VERIFIED_SLOTS",
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
