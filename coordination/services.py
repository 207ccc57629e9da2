"""Actions on scheduler state that other apps and the admin call (one code path each)."""

import logging
from datetime import datetime, timedelta

from django.db import DatabaseError, connection, transaction

from coordination import ledger
from coordination.clock import database_now
from coordination.models import JobState, WakeUp
from coordination.reasons import paused_reason
from coordination.registry import group as group_named
from coordination.registry import registry

logger = logging.getLogger(__name__)


class CannotPlan(Exception):
    """A job cannot be resumed because its schedule raises while its next slot is worked out.

    The message is one line that says so and how to fix it; the job stays paused as it was.
    """


def notify_group(group_name: str) -> None:
    """Wake the group's leader once the surrounding transaction commits.

    PostgreSQL: ``NOTIFY`` (delivered at commit) ends the leader's sleep on its lock socket.
    MySQL: the group's wake-up counter is bumped after commit (so no editor's transaction
    waits on that row); every heartbeat reads the counters, and the leader's own heartbeat
    wakes its loop when its group's counter moved. SQLite: the leader polls.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [group_named(group_name).channel])
    elif connection.vendor == "mysql":
        transaction.on_commit(lambda: _bump_wakeup(group_name))


def _bump_wakeup(group_name: str) -> None:
    """Add one to the group's wake-up counter (one statement; creates the row the first time).

    The caller's change is committed already: a failure here only delays the leader until its
    next safety-net tick (``INSTATIC_NOTIFY_MAX_TICK``), so it is logged, not raised.
    """
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {WakeUp._meta.db_table} (`group`, seq) VALUES (%s, 1)"
                " ON DUPLICATE KEY UPDATE seq = seq + 1",
                [group_name],
            )
    except DatabaseError as exc:
        logger.warning("could not wake the %s leader: %s", group_name, exc)


def request_wakeup(
    job_name: str, at: datetime | None, *, skip_locked: bool = False, after: timedelta | None = None
) -> bool:
    """Ask for ``job_name`` to run at ``at`` at the latest (e.g. a post scheduled sooner);
    ``None`` means now, by the database clock, or ``after`` from now (wake-ups within it
    share one run). Return whether its state row was there and not held.

    Lowers the job's wake-up instant (never raises it) and, when it moved, wakes the group's
    leader once the surrounding transaction commits (a wake-up already as close has woken
    it). With ``skip_locked``, a state row its job's run holds is left alone rather than
    waited for (False is returned: the caller decides whether that run looks again itself).
    """
    job = registry.get(job_name)
    group_name = job.group if job else None
    with transaction.atomic():
        recorded = ledger.record_wakeup_request(job_name, at, skip_locked=skip_locked, after=after)
        if not recorded.reached:
            logger.debug("wake-up for %s not written: no state yet, or its row is held", job_name)
        if group_name and recorded.moved:
            notify_group(group_name)
    return recorded.reached


def request_run(job_name: str, *, requested_by: str = "") -> bool:
    """Ask the current leader to run ``job_name`` now, even if paused (a manual run)."""
    with transaction.atomic():
        state = JobState.objects.select_for_update().filter(name=job_name).first()
        if state is None:
            return False
        ledger.record_run_request(job_name, requested_by=requested_by)
        notify_group(state.group)
    return True


def set_paused(job_name: str, paused: bool, *, reason: str = "") -> bool:
    """Pause or resume a job; resuming clears its failure streak.

    On resume, the slots that passed while the job was paused are recorded as missed (reason
    ``paused`` or ``plugin disabled``) and the job moves on to its next slot, so they are
    neither run late as a backlog nor lost from the ledger. If its schedule raises while
    those slots are worked out, :class:`CannotPlan` is raised and nothing changes.
    """
    with transaction.atomic():
        state = JobState.objects.select_for_update().filter(name=job_name).first()
        if state is None:
            return False
        if not paused and state.paused:
            _record_paused_gap(state)
        ledger.record_paused(job_name, paused, reason=reason)
        notify_group(state.group)
    return True


def _record_paused_gap(state: JobState) -> None:
    """Record the slots a paused job let pass, up to now (the leader records them as they go)."""
    job = registry.get(state.name)
    if job is None or not job.schedule.periodic or state.next_due is None:
        return  # not declared in this process: the leader's tick records them
    now = database_now()
    if state.next_due > now:
        return
    try:
        before = job.schedule.next_after(now)
        ledger.skip_slots(job, state.next_due, before=before, reason=paused_reason(state))
    except DatabaseError:
        raise
    except Exception as exc:
        # The caller's transaction rolls back: the job stays paused, with its reason.
        raise CannotPlan(f"{state.name} stays paused: {ledger.unplannable(exc)}") from exc
