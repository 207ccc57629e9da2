"""Writes of job states: creating them, pausing, run-now and wake-up requests, moving a
job to its next slot.
"""

import logging
from datetime import datetime, timedelta
from typing import NamedTuple

from django.db import connection
from django.db.models import Case, DateTimeField, ExpressionWrapper, F, Q, Value, When
from django.db.models.functions import Now

from coordination.models import JobState
from coordination.quoting import among
from coordination.reasons import UNPLANNABLE
from coordination.registry import Job

logger = logging.getLogger(__name__)


def unplannable(exc: BaseException) -> str:
    """Return the pause reason of a job whose planning raised ``exc`` (one line, what to do)."""
    problem = (str(exc).strip().splitlines() or [""])[0]
    reason = (
        f"{UNPLANNABLE} ({type(exc).__name__}: {problem}); fix its schedule, deploy, then resume it"
    )
    if len(reason) <= 255:
        return reason
    return f"{UNPLANNABLE} ({type(exc).__name__}: {problem[:120]}…); fix it, then resume it"


def first_due(job: Job, now: datetime) -> datetime | None:
    """Return when a new (or rescheduled) job is first due: a periodic job at its next slot
    (None when the calendar has none left), a when-due job at once."""
    return job.schedule.next_after(now) if job.schedule.periodic else now


def ensure_states(
    jobs: list[Job], states: dict[str, JobState], now: datetime
) -> dict[str, Exception]:
    """Create missing job states and reschedule jobs whose schedule changed.

    A job whose first slot cannot be computed (its schedule raises) gets its state all the
    same, paused with the reason (:func:`unplannable`), so the other jobs are not held up.
    Return those jobs' errors, by name.
    """
    failed: dict[str, Exception] = {}

    def planned(job: Job) -> dict:
        try:
            return {"next_due": first_due(job, now)}
        except Exception as exc:
            failed[job.name] = exc
            return {"next_due": None, "paused": True, "paused_reason": unplannable(exc)}

    missing = [job for job in jobs if job.name not in states]
    if missing:
        JobState.objects.bulk_create(
            [
                JobState(
                    name=job.name,
                    group=job.group,
                    schedule=job.schedule.describe(),
                    fingerprint=job.fingerprint,
                    **planned(job),
                )
                for job in missing
            ],
            ignore_conflicts=True,
        )
    for job in jobs:
        state = states.get(job.name)
        if state is None:
            continue
        if state.fingerprint != job.fingerprint or state.group != job.group:
            values = planned(job)
            if "paused" in values and state.paused:
                del values["paused"], values["paused_reason"]  # keep an earlier pause's reason
            JobState.objects.filter(name=job.name).update(
                group=job.group,
                schedule=job.schedule.describe(),
                fingerprint=job.fingerprint,
                **values,
            )
            logger.info(
                "job %s schedule is now %s; next slot %s",
                job.name,
                job.schedule.describe(),
                values["next_due"].isoformat() if values["next_due"] else "none",
            )
        elif state.retired_at is not None:
            JobState.objects.filter(name=job.name).update(retired_at=None)
    return failed


def pause_unplannable(job: Job, exc: BaseException) -> bool:
    """Pause ``job`` because planning it raised ``exc``; return False if it was paused already
    (an operator's or an earlier reason is kept)."""
    return bool(
        JobState.objects.filter(name=job.name, paused=False).update(
            paused=True, paused_reason=unplannable(exc)
        )
    )


def record_paused(job_name: str, paused: bool, *, reason: str = "") -> None:
    """Record an operator's pause (with its reason) or resume of a job; a resume also clears
    the job's failure streak."""
    values = {"paused": paused, "paused_reason": reason[:255] if paused else ""}
    if not paused:
        values["consecutive_failures"] = 0
    JobState.objects.filter(name=job_name).update(**values)


def pause_jobs(job_names: list[str], *, reason: str) -> int:
    """Pause the named jobs that are not paused yet, with ``reason``; return how many."""
    return JobState.objects.filter(name__in=job_names, paused=False).update(
        paused=True, paused_reason=reason
    )


def record_run_request(job_name: str, *, requested_by: str = "") -> None:
    """Record a run-now request for ``job_name`` (made now, by ``requested_by``)."""
    JobState.objects.filter(name=job_name).update(
        run_requested_at=Now(), run_requested_by=requested_by[:150]
    )


class WakeupRecorded(NamedTuple):
    """What :func:`record_wakeup_request` found: whether the job's state row was there and
    not held by another transaction (``reached``), and whether its wake-up instant moved
    closer (``moved``; it did not if it was already as close)."""

    reached: bool
    moved: bool


def record_wakeup_request(
    job_name: str, at: datetime | None, *, skip_locked: bool = False, after: timedelta | None = None
) -> WakeupRecorded:
    """Lower ``job_name``'s wake-up instant to ``at`` (never raise it). ``None`` means the
    database's now, or ``after`` past it (a time on the database's clock, never this
    process's); ``at`` and ``after`` do not go together.

    A row whose instant is already as close is not written: only a wake-up that moves it
    needs its leader woken.

    With ``skip_locked`` (inside a transaction), a state row that another transaction holds
    (its job's run) is left alone instead of waited for, where the database can skip locked
    rows.
    """
    if at is not None and after is not None:
        raise ValueError("give a wake-up instant or a delay after the database's now, not both")
    state = JobState.objects.filter(name=job_name)
    if skip_locked and connection.features.has_select_for_update_skip_locked:
        unheld = list(state.select_for_update(skip_locked=True).values_list("pk", flat=True))
        state = JobState.objects.filter(pk__in=unheld)
        reached = bool(unheld)
    else:
        reached = None  # known from the update: the row is waited for, never skipped
    if at is not None:
        instant = Value(at)
    elif after:
        instant = ExpressionWrapper(Now() + Value(after), output_field=DateTimeField())
    else:
        instant = Now()
    moved = state.filter(Q(wake_at__isnull=True) | Q(wake_at__gt=instant)).update(wake_at=instant)
    if reached is None:
        reached = bool(moved) or state.exists()
    return WakeupRecorded(reached=reached, moved=bool(moved))


def lock_state_nowait(job_name: str) -> None:
    """Lock ``job_name``'s state row for the caller's transaction without waiting.

    Raises the database's ``OperationalError`` if another transaction holds it; a no-op where
    the database has no ``NOWAIT`` row locks (SQLite).
    """
    if not connection.features.has_select_for_update_nowait:
        return
    list(JobState.objects.select_for_update(nowait=True).filter(name=job_name).values_list("pk"))


def retire_undeclared(group: str, declared_here: set[str], declared_anywhere: set[str]) -> int:
    """Mark jobs that no live node declares as retired (kept and visible, never run)."""
    retired = (
        JobState.objects.filter(group=group, retired_at__isnull=True)
        .exclude(name__in=declared_here | declared_anywhere)
        .update(retired_at=Now())
    )
    return retired


def slot_dealt_with(
    job: Job,
    next_due: datetime | None,
    manual_requested_at: datetime | None,
    *,
    wake_before: datetime | None = None,
) -> None:
    """Mark a claimed (or taken) slot as dealt with: the job moves on to ``next_due``, the
    run-now request made at ``manual_requested_at`` is served, and so is a wake-up due by
    ``wake_before`` (a run queued for a worker serves it: the worker's outcome knows nothing
    of it)."""
    if next_due is not None:
        advance(job, next_due)
    served = {}
    if manual_requested_at is not None:
        served.update(request_served(manual_requested_at))
    if wake_before is not None:
        served.update(wakeup_served(wake_before))
    if served:
        JobState.objects.filter(name=job.name).update(**served)


def wakeup_served(before: datetime) -> dict:
    """Return update values clearing a wake-up due at or before ``before`` (the slot of the
    run that serves it); one that came later is kept, for a run after it. Compared as
    :func:`request_served` compares, for SQLite's times as text."""
    served = Q(wake_at__lt=before + timedelta(microseconds=1))
    return {"wake_at": Case(When(served, then=None), default=F("wake_at"))}


def request_served(requested_at: datetime) -> dict:
    """Return update values clearing a run-now request made at or before ``requested_at``.

    Compared as "before ``requested_at`` plus a microsecond", the same instants as "at or
    before", because SQLite compares times as text: a request ``Now()`` wrote at a whole second
    is ``'...:SS.000'``, which sorts after the ``'...:SS'`` Django writes for the same instant
    read back, so it was never cleared and a ``--once`` tick planned it for ever. SQLite's
    ``Now()`` has millisecond steps, so the bound's text sorts after the served request's in
    either form and before any later request's; on the other databases the two are the same.
    """
    served = Q(run_requested_at__lt=requested_at + timedelta(microseconds=1))
    return {
        "run_requested_at": Case(When(served, then=None), default=F("run_requested_at")),
        "run_requested_by": Case(When(served, then=Value("")), default=F("run_requested_by")),
    }


def advance(job: Job, next_due: datetime | None) -> None:
    """Move a job's next slot forward (never back) without recording a run; ``None``: the
    calendar holds no next slot.

    Never back: a stale leader that wakes up with an old plan cannot rewind the job.
    """
    advance_jobs([job.name], next_due)


def advance_jobs(names: list[str], next_due: datetime | None) -> None:
    """Move the named jobs' next slot forward to ``next_due`` (never back), in one statement;
    ``None`` (no slot left in the calendar) leaves them without one."""
    named = among(names, "text")
    if next_due is None:
        JobState.objects.filter(name__in=named).update(next_due=None)
        return
    JobState.objects.filter(
        Q(next_due__isnull=True) | Q(next_due__lt=next_due), name__in=named
    ).update(next_due=next_due)
