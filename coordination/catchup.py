"""Which slot a late periodic job runs next, and which older slots are recorded as missed.

A pure function of the job's policy, its next slot, the database time and when its previous
run finished, so every rule is testable without a database. The loop applies the answer one
slot at a time: it records the skipped slots (in batches, each committed with the job's next
slot) and runs the chosen slot, then decides again. Deciding per slot is what keeps a run-now
request and the next on-time slot from waiting behind a backlog.

The rules (``INSTATIC_MISFIRE_GRACE`` is the grace, 30 s by default):

- ``latest``: slots that are merely late (a takeover, a busy database; the oldest within the
  grace) all run, in order. Slots that came due while the job's previous run was still going
  are not queued up behind it: the older ones are missed (``overlap``) and the newest runs, so
  a job slower than its period runs back to back instead of falling ever further behind.
  After real downtime (the oldest beyond the grace) only the newest runs; the rest are missed
  (``downtime``).
- ``skip``: only the newest slot, and only while it is within the grace; the rest are missed
  (``downtime``).
- ``all``: every slot within ``missed_window`` (default: the grace) runs, oldest first; older
  ones are missed (``catch-up window``).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from coordination.models import JobRun
from coordination.registry import Job, Missed
from coordination.schedules import CALENDAR_END, Schedule

_MICROSECOND = timedelta(microseconds=1)
Reason = JobRun.MissedReason


def _after(schedule: Schedule, instant: datetime) -> datetime:
    """Return the slot after ``instant``, or the end of the calendar when there is none (so
    "before it" means every slot left)."""
    return schedule.next_after(instant) or CALENDAR_END


@dataclass(frozen=True)
class CatchUp:
    """Run ``run`` now (if set) after recording the slots before ``skip_before`` as missed."""

    run: datetime | None
    skip_before: datetime | None = None
    reason: str = ""


def decide(
    job: Job,
    *,
    next_due: datetime,
    now: datetime,
    grace: timedelta,
    previous_finished_at: datetime | None = None,
) -> CatchUp:
    """Return what a due periodic job does now (``next_due <= now``)."""
    schedule = job.schedule
    latest = schedule.slots_between(next_due, now, limit=1)
    if not latest:
        return CatchUp(run=None)  # next_due is between slots: nothing is due yet
    latest = latest[0]
    first = _after(schedule, next_due - _MICROSECOND)
    after_latest = _after(schedule, latest)
    if job.missed is Missed.SKIP:
        if now - latest <= grace:
            return CatchUp(run=latest, skip_before=latest, reason=Reason.DOWNTIME)
        return CatchUp(run=None, skip_before=after_latest, reason=Reason.DOWNTIME)
    if job.missed is Missed.ALL:
        cutoff = now - (job.missed_window or grace)
        if first >= cutoff:
            return CatchUp(run=first)
        oldest_kept = _after(schedule, cutoff - _MICROSECOND)
        if oldest_kept > latest:
            return CatchUp(run=None, skip_before=after_latest, reason=Reason.CATCH_UP_WINDOW)
        return CatchUp(run=oldest_kept, skip_before=oldest_kept, reason=Reason.CATCH_UP_WINDOW)
    if now - first > grace:
        return CatchUp(run=latest, skip_before=latest, reason=Reason.DOWNTIME)
    if previous_finished_at is not None and first < latest and first <= previous_finished_at:
        # Slots that fell due while the previous run was still going: run the first one
        # after it finished (or the newest), not each of them in turn.
        run = min(_after(schedule, previous_finished_at), latest)
        return CatchUp(run=run, skip_before=run, reason=Reason.OVERLAP)
    return CatchUp(run=first)
