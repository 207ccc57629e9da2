"""Writes to the run ledger and job state: claiming slots, recording outcomes.

This module is the one writer of ``JobRun`` and ``JobState`` rows: the loop, the runner, the
journal, the services other apps call and the retention plugin record through its functions,
one for each thing recorded, and read elsewhere (``coordination.selectors``).

The unique constraint on (job, slot) is what makes a slot run once: a claim is an INSERT that
a second claimant cannot make, whoever thinks it leads.
"""

import logging
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice

from django.db import IntegrityError, connection, transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Coalesce, Least, Now
from django.db.models.sql import UpdateQuery

from coordination import liveness
from coordination.conf import settings
from coordination.metrics import count_missed_slots
from coordination.models import JobRun, JobState, Node
from coordination.reasons import UNPLANNABLE
from coordination.registry import Job
from coordination.schedules import CALENDAR_END
from coordination.selectors import live_instances, live_nodes_q

logger = logging.getLogger(__name__)

MAX_ERROR_LENGTH = 20_000
#: Missed slots written per statement (and per transaction) when a long gap is recorded.
MISSED_BATCH = 5_000


@dataclass(frozen=True)
class RunOutcome:
    """How one run of a job ended, as the run's ledger row and the job's state record it.

    The runner builds it once and hands it to every write of an outcome
    (:func:`finish_with_state`, :func:`record_failed`, :func:`record_outcome_in_state`), so a
    new outcome field is one edit here rather than one in each of their signatures.
    """

    slot: datetime
    status: str
    duration: float | None
    lateness: float | None
    error: str
    #: The name of the node that ran it.
    node: str
    #: The job's next slot; ``None`` leaves it (the slot's claim moved a periodic job on).
    next_due: datetime | None
    #: True when the job has no next slot (a when-due job at the end of the calendar): its
    #: next slot is cleared rather than left.
    no_next_slot: bool = False
    #: When a failed attempt is tried again (the job's ``retries``), or ``None``.
    retry_at: datetime | None = None
    #: Wake-up requests due up to this instant were served by the run.
    wake_before: datetime | None = None
    #: The time of the run-now request the run served, if it served one.
    manual_requested_at: datetime | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == JobRun.Status.SUCCEEDED

    @property
    def stored_error(self) -> str:
        """The error text as stored: cut to ``MAX_ERROR_LENGTH``."""
        return self.error[:MAX_ERROR_LENGTH]


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


def record_wakeup_request(job_name: str, at: datetime, *, skip_locked: bool = False) -> int:
    """Lower ``job_name``'s wake-up instant to ``at`` (never raise it); return how many state
    rows changed (0: the job has no state yet).

    With ``skip_locked`` (inside a transaction), a state row that another transaction holds
    (its job's run) is left alone instead of waited for, where the database can skip locked
    rows.
    """
    state = JobState.objects.filter(name=job_name)
    if skip_locked and connection.features.has_select_for_update_skip_locked:
        state = JobState.objects.filter(
            pk__in=list(state.select_for_update(skip_locked=True).values_list("pk", flat=True))
        )
    return state.update(wake_at=Least(Coalesce("wake_at", Value(at)), Value(at)))


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


def record_missed(job: Job, slots: list[datetime], *, reason: str) -> None:
    """Record slots that will not run, with why, so nothing is silently lost."""
    if not slots:
        return
    JobRun.objects.bulk_create(
        [
            JobRun(job=job.name, slot=slot, status=JobRun.Status.MISSED, reason=reason)
            for slot in slots
        ],
        ignore_conflicts=True,
    )
    JobState.objects.filter(name=job.name).update(missed_count=F("missed_count") + len(slots))
    count_missed_slots(job, reason, len(slots))


def skip_slots(job: Job, start: datetime, *, before: datetime | None, reason: str) -> int:
    """Record every slot in ``[start, before)`` as missed and move the job's next slot past it
    (``before=None``: to the end of the calendar).

    However long the gap (an every-second job down for a day has 86,400 slots), it is written
    in batches of ``MISSED_BATCH`` rows, each committed together with the job's next slot, so
    memory stays bounded and a crash half-way loses nothing: the next leader carries on from
    the last committed batch. Return how many slots were recorded.
    """
    slots = job.schedule.iter_slots(start, before or CALENDAR_END)
    total = 0
    while batch := list(islice(slots, MISSED_BATCH)):
        with transaction.atomic():
            record_missed(job, batch, reason=reason)
            advance(job, job.schedule.next_after(batch[-1]))
        total += len(batch)
    return total


def slot_dealt_with(
    job: Job, next_due: datetime | None, manual_requested_at: datetime | None
) -> None:
    """Mark a claimed (or taken) slot as dealt with: the job moves on to ``next_due``, and
    the run-now request made at ``manual_requested_at`` is served."""
    if next_due is not None:
        advance(job, next_due)
    if manual_requested_at is not None:
        serve_run_request(job, manual_requested_at)


def serve_run_request(job: Job, requested_at: datetime) -> None:
    """Clear the run-now request a run served (keep one that arrived after it)."""
    JobState.objects.filter(name=job.name).update(**_request_served(requested_at))


def _request_served(requested_at: datetime) -> dict:
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


def claim(
    job: Job,
    slot: datetime,
    *,
    trigger: str,
    node: str,
    instance: str,
    requested_by: str = "",
    savepoint: bool = True,
    queued: bool = False,
) -> JobRun | None:
    """Insert the ledger row for (job, slot) as running (``queued``: queued for a worker
    process, by this node); return ``None`` if already claimed.

    With ``savepoint=False`` (inside a run's own transaction) a taken slot raises
    ``IntegrityError`` instead, saving two statements per run.
    """
    try:
        with transaction.atomic(savepoint=savepoint):
            return JobRun.objects.create(
                job=job.name,
                slot=slot,
                trigger=trigger,
                node=node,
                node_instance=instance,
                requested_by=requested_by,
                **_claimed_as(queued),
            )
    except IntegrityError:
        if not savepoint:
            raise
        return None


def _claimed_as(queued: bool) -> dict:
    """Return a new claim's status and time: running from now, or queued from now."""
    if queued:
        return {"status": JobRun.Status.QUEUED, "queued_at": Now()}
    return {"status": JobRun.Status.RUNNING, "started_at": Now()}


def record_failed(
    job: Job,
    outcome: RunOutcome,
    *,
    trigger: str,
    instance: str,
    started_at: datetime | None = None,
    finished_at: datetime | None = None,
    requested_by: str = "",
    retry_of: JobRun | None = None,
    queued: JobRun | None = None,
) -> bool:
    """Record a rolled-back transactional run as failed (or timed out); return False when
    the row it would write is no longer this run's to write.

    A first attempt inserts the slot's row (an existing row is kept, and False returned: the
    slot was dealt with elsewhere, so the job's state is not this run's to write either). A
    retry (``retry_of``) rolled back its claim with the work, so it counts the attempt on the
    existing row instead, still only while that row waits for this retry. A run on a worker
    process (``queued``) rolled back its start, so it records the outcome on its queued row,
    while that row is still queued for the same attempt.
    """
    values = {
        "status": outcome.status,
        "node": outcome.node,
        "node_instance": instance,
        "started_at": started_at,
        "finished_at": finished_at,
        "duration": outcome.duration,
        "error": outcome.stored_error,
        "retry_at": outcome.retry_at,
    }
    if queued is not None:
        return bool(
            JobRun.objects.filter(
                pk=queued.pk, attempt=queued.attempt, status=JobRun.Status.QUEUED
            ).update(**values)
        )
    if retry_of is not None:
        return bool(
            JobRun.objects.filter(_awaiting_retry(), pk=retry_of.pk).update(
                trigger=JobRun.Trigger.RETRY, attempt=retry_of.attempt + 1, **values
            )
        )
    try:
        with transaction.atomic():
            JobRun.objects.create(
                job=job.name,
                slot=outcome.slot,
                trigger=trigger,
                requested_by=requested_by,
                **values,
            )
    except IntegrityError:
        return False
    return True


def _awaiting_retry() -> Q:
    """Runs another attempt may take: abandoned ones, and failed ones with a retry time."""
    return Q(status=JobRun.Status.ABANDONED) | Q(
        status=JobRun.Status.FAILED, retry_at__isnull=False
    )


def claim_retry(run: JobRun, *, node: str, instance: str, queued: bool = False) -> bool:
    """Take an abandoned or failed run for another attempt (``queued``: queue it for a worker
    process); return False if someone else did."""
    return bool(
        JobRun.objects.filter(_awaiting_retry(), pk=run.pk).update(
            trigger=JobRun.Trigger.RETRY,
            attempt=F("attempt") + 1,
            node=node,
            node_instance=instance,
            finished_at=None,
            retry_at=None,
            **{"started_at": None, **_claimed_as(queued)},
        )
    )


def take_retry(run: JobRun, *, node: str, instance: str, queued: bool = False) -> JobRun | None:
    """Take ``run`` for another attempt (:func:`claim_retry`) and return its row as taken, or
    ``None`` if someone else took it or it no longer waits for one."""
    if not claim_retry(run, node=node, instance=instance, queued=queued):
        return None
    return JobRun.objects.get(pk=run.pk)


def take_queued(run_id: int, attempt: int, *, node: str, instance: str) -> JobRun | None:
    """Start the queued run ``run_id`` on this worker process: move its row from queued to
    running with the worker's node and instance; return the row, or ``None`` when it is no
    longer queued for ``attempt`` (another delivery took it, it was skipped or retried).

    This conditional update is what makes a queued run start once, however often its task
    is delivered. The worker's instance and the attempt are the run's fencing token: its
    outcome is written only while the row still holds both (:func:`finish_with_state`), so a
    worker whose run was abandoned meanwhile (frozen past its lease) records nothing.
    """
    taken = JobRun.objects.filter(pk=run_id, attempt=attempt, status=JobRun.Status.QUEUED).update(
        status=JobRun.Status.RUNNING, node=node, node_instance=instance, started_at=Now()
    )
    if not taken:
        return None
    return JobRun.objects.get(pk=run_id)


def skip_queued(run: JobRun, *, reason: str) -> bool:
    """Record a queued run that will not start (its job was paused meanwhile) as missed with
    ``reason``; return False if it was no longer queued."""
    skipped = JobRun.objects.filter(
        pk=run.pk, attempt=run.attempt, status=JobRun.Status.QUEUED
    ).update(status=JobRun.Status.MISSED, reason=reason, finished_at=Now())
    if skipped:
        JobState.objects.filter(name=run.job).update(missed_count=F("missed_count") + 1)
    return bool(skipped)


def record_succeeded(run: JobRun, job: Job, outcome: RunOutcome) -> None:
    """Record a transactional run's success inside its own transaction: the run's row and the
    job's state (a success pauses nothing)."""
    JobRun.objects.filter(pk=run.pk).update(
        status=JobRun.Status.SUCCEEDED, duration=outcome.duration, finished_at=Now()
    )
    record_outcome_in_state(job, outcome)


def restore_lost_run(
    *, job: str, slot: datetime, status: str, trigger: str, node: str, instance: str, note: str
) -> bool:
    """Write back a claim-first run that a failover lost from the ledger (``note`` says so);
    return False if the slot is taken meanwhile."""
    finished = status != JobRun.Status.RUNNING
    try:
        with transaction.atomic():
            JobRun.objects.create(
                job=job,
                slot=slot,
                status=status,
                trigger=trigger,
                node=node,
                node_instance=instance,
                started_at=Now(),
                finished_at=Now() if finished else None,
                error=note,
            )
    except IntegrityError:
        return False
    return True


def _finishable(run: JobRun, instance: str):
    """Return ``run``'s row while this node's attempt still owns it (running or timed out)."""
    return JobRun.objects.filter(
        pk=run.pk,
        status__in=[JobRun.Status.RUNNING, JobRun.Status.TIMED_OUT],
        node_instance=instance,
        attempt=run.attempt,
    )


def _finish_values(outcome: RunOutcome) -> dict:
    """Return the run row's update values for ``outcome``."""
    return {
        "status": outcome.status,
        "finished_at": Now(),
        "duration": outcome.duration,
        "error": outcome.stored_error,
        "retry_at": outcome.retry_at,
    }


def record_timed_out(run: JobRun, *, instance: str) -> bool:
    """Record that this node's claim-first ``run`` outlived its max duration (its row and its
    job's last status); return False if the run was no longer this node's running one."""
    timed_out = JobRun.objects.filter(
        pk=run.pk, status=JobRun.Status.RUNNING, node_instance=instance
    ).update(status=JobRun.Status.TIMED_OUT, error="ran past its max_duration")
    if not timed_out:
        return False
    JobState.objects.filter(name=run.job).update(last_status=JobRun.Status.TIMED_OUT)
    return True


def delete_runs(run_ids: list[int]) -> int:
    """Delete the ledger rows ``run_ids`` (run-history retention); return how many."""
    return JobRun.objects.filter(pk__in=run_ids).delete()[0]


def abandon_orphans(job_names: list[str], *, reason: str = "") -> int:
    """Mark running rows of nodes that are no longer alive as abandoned."""
    if not job_names:
        return 0
    return (
        JobRun.objects.filter(JobRun.in_progress(), job__in=job_names)
        .exclude(node_instance__in=live_instances())
        .update(
            status=JobRun.Status.ABANDONED,
            finished_at=Now(),
            error=reason or "its node stopped heartbeating during the run",
        )
    )


#: Why a run of a node that still looked alive was abandoned at once.
VANISHED_REASON = (
    "its node's process is gone (the database shows none of its sessions); abandoned at once"
)


def abandon_vanished(job_names: list[str], *, instance: str) -> int:
    """Mark in-progress runs abandoned whose node is gone though its lease has not run out.

    A SIGKILLed node's heartbeat stays fresh for up to a lease, and until then its runs would
    hold their jobs. When the database server shows none of the sessions that node process
    opened, the run cannot be alive (``liveness.vanished_instances`` says when that proves
    it); its runs are abandoned now, and the job's retry policy applies as for any abandoned
    run. One read when no live node has a run going, which is the usual case.
    """
    if not job_names:
        return 0
    candidates = {
        node_instance: (name, last_heartbeat)
        for name, node_instance, last_heartbeat in Node.objects.filter(live_nodes_q())
        .exclude(instance=instance)
        .filter(
            instance__in=JobRun.objects.filter(JobRun.in_progress(), job__in=job_names).values(
                "node_instance"
            )
        )
        .values_list("name", "instance", "last_heartbeat")
    }
    gone = liveness.vanished_instances(candidates)
    if not gone:
        return 0
    return (
        JobRun.objects.filter(JobRun.in_progress(), job__in=job_names, node_instance__in=gone)
    ).update(status=JobRun.Status.ABANDONED, finished_at=Now(), error=VANISHED_REASON)


def abandon_own(instance: str, job_names: list[str], *, reason: str) -> int:
    """Mark this node's unfinished runs of ``job_names`` abandoned (shutdown past the grace)."""
    return JobRun.objects.filter(
        JobRun.in_progress(), job__in=job_names, node_instance=instance
    ).update(status=JobRun.Status.ABANDONED, finished_at=Now(), error=reason)


def record_outcome_in_state(job: Job, outcome: RunOutcome) -> bool:
    """Record the outcome in the job's state; pause it after too many failures in a row.

    Return True when this failure paused the job.
    """
    JobState.objects.filter(name=job.name).update(**_state_values(outcome))
    return _pause_after_failures(job, outcome)


def _state_values(outcome: RunOutcome) -> dict:
    """Return the job state's update values for a run's outcome."""
    values = {
        "last_slot": outcome.slot,
        "last_status": outcome.status,
        "last_error": outcome.stored_error,
        "last_duration": outcome.duration,
        "last_lateness": outcome.lateness,
        "last_finished_at": Now(),
        "last_node": outcome.node,
        "consecutive_failures": 0 if outcome.succeeded else F("consecutive_failures") + 1,
    }
    if outcome.next_due is not None or outcome.no_next_slot:
        values["next_due"] = outcome.next_due
    # One statement: clear the wake-up and run-now requests this run served, but keep any
    # that arrived after it started.
    if outcome.wake_before is not None:
        values["wake_at"] = Case(
            When(wake_at__lte=outcome.wake_before, then=None), default=F("wake_at")
        )
    if outcome.manual_requested_at is not None:
        values.update(_request_served(outcome.manual_requested_at))
    return values


def _pause_after_failures(job: Job, outcome: RunOutcome) -> bool:
    """Pause the job if this failure made too many in a row; return True if it did."""
    if outcome.succeeded:
        return False
    threshold = int(settings.FAILURE_PAUSE_THRESHOLD)
    if threshold <= 0:
        return False
    return bool(
        JobState.objects.filter(
            Q(name=job.name, paused=False, consecutive_failures__gte=threshold)
        ).update(paused=True, paused_reason=f"paused after {threshold} failures in a row")
    )


def finish_with_state(
    run: JobRun, job: Job, outcome: RunOutcome | None = None, *, instance: str, **fields
) -> bool | None:
    """Record a claimed run's outcome and the job's state; return whether that paused the job,
    or ``None`` if the run was meanwhile marked abandoned or timed out elsewhere.

    Both or neither: on PostgreSQL one statement (the state's ``UPDATE`` in a ``WITH`` after
    the run's, done only if the run's matched), which needs no transaction around it, so a
    run's outcome costs one round trip; elsewhere both ``UPDATE`` statements in one transaction.
    Callers without a :class:`RunOutcome` at hand (tests, the benchmarks) may give its
    ``fields`` as keywords instead.
    """
    if outcome is None:
        outcome = RunOutcome(**fields)
    elif fields:
        raise TypeError("finish_with_state() takes an outcome or its fields, not both")
    run_rows = _finishable(run, instance)
    run_values = _finish_values(outcome)
    state_values = _state_values(outcome)
    if connection.vendor != "postgresql":
        with transaction.atomic():
            if not run_rows.update(**run_values):
                return None
            JobState.objects.filter(name=job.name).update(**state_values)
            return _pause_after_failures(job, outcome)
    run_sql, run_params = _update_sql(run_rows, run_values)
    state_sql, state_params = _update_sql(JobState.objects.filter(name=job.name), state_values)
    # A failure may pause the job in a second statement: then both go in one transaction.
    with nullcontext() if outcome.succeeded else transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                f"WITH finished AS ({run_sql} RETURNING 1),"
                f" state AS ({state_sql} AND EXISTS (SELECT 1 FROM finished) RETURNING 1)"
                " SELECT (SELECT count(*) FROM finished)",
                (*run_params, *state_params),
            )
            (finished,) = cursor.fetchone()
        if not finished:
            return None
        return _pause_after_failures(job, outcome)


def _update_sql(queryset, values: dict) -> tuple[str, tuple]:
    """Return the SQL and parameters of ``queryset.update(**values)`` without running it."""
    query = queryset.query.chain(UpdateQuery)
    query.add_update_values(values)
    query.annotations = {}
    return query.get_compiler(queryset.db).as_sql()


def advance(job: Job, next_due: datetime | None) -> None:
    """Move a job's next slot forward (never back) without recording a run; ``None``: the
    calendar holds no next slot.

    Never back: a stale leader that wakes up with an old plan cannot rewind the job.
    """
    _advance([job.name], next_due)


def _insert_claims(runs: list[JobRun]) -> list[JobRun]:
    """Insert ``runs`` (one job and slot each, the rest alike) and return them with their ids.

    ``bulk_create`` sends every value of every row as a parameter: for a thousand claims,
    15,000 of them, which Django and the driver take a quarter of a second to assemble while
    every claimed job waits to start. On PostgreSQL the rows are one ``INSERT ... SELECT``
    over two arrays (jobs and slots) with the shared values once; the same columns and the
    values Django would save, taken from the model's fields.
    """
    if connection.vendor != "postgresql" or not runs:
        return JobRun.objects.bulk_create(runs)
    first, quote = runs[0], connection.ops.quote_name
    columns, selected, params = [], [], []
    for field in JobRun._meta.concrete_fields:
        if field.primary_key:
            continue
        columns.append(quote(field.column))
        if field.name in ("job", "slot"):
            selected.append(f"t.{field.name}")
        elif isinstance(getattr(first, field.attname), Now):
            selected.append("STATEMENT_TIMESTAMP()")  # Now(), as the other claims write it
        else:
            selected.append("%s")
            params.append(field.get_db_prep_save(getattr(first, field.attname), connection))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(JobRun._meta.db_table)} ({', '.join(columns)})"
            f" SELECT {', '.join(selected)}"
            " FROM unnest(%s::varchar[], %s::timestamptz[]) AS t(job, slot)"
            f" RETURNING {quote(JobRun._meta.pk.column)}, {quote('job')}",
            (*params, [run.job for run in runs], [run.slot for run in runs]),
        )
        ids = dict((job, pk) for pk, job in cursor.fetchall())
    for run in runs:  # one claim per job in a batch: a job never overlaps itself
        run.pk = ids[run.job]
        run._state.adding = False
    return runs


def _advance(names: list[str], next_due: datetime | None) -> None:
    """Move the named jobs' next slot forward to ``next_due`` (never back), in one statement;
    ``None`` (no slot left in the calendar) leaves them without one."""
    if next_due is None:
        JobState.objects.filter(name__in=names).update(next_due=None)
        return
    JobState.objects.filter(
        Q(next_due__isnull=True) | Q(next_due__lt=next_due), name__in=names
    ).update(next_due=next_due)


def claim_scheduled(
    claims: list[tuple[Job, datetime, datetime]],
    *,
    node: str,
    instance: str,
    queued: bool = False,
) -> dict[str, JobRun]:
    """Claim many scheduled slots at once, each job moving on to its next slot; return the runs
    this node claimed, by job.

    ``claims`` are (job, slot, next slot) of claim-first jobs. One transaction: one ``INSERT``
    of every ledger row and one ``UPDATE`` per distinct next slot (a thousand jobs due every
    minute share one), committed before any of the jobs starts, so a crash from then on
    leaves abandoned runs, never a slot run twice. The unique ``(job, slot)`` constraint still
    decides: a slot another node already claimed is left out of the answer (the whole batch
    is then claimed again, skipping taken rows, and the claimed rows are read back). Jobs move
    to their next slot whether this node claimed theirs or not: either way it is dealt with.
    With ``queued`` the rows are queued for worker processes (inside the caller's
    transaction, which enqueues their tasks too) instead of running here.
    """
    if not claims:
        return {}

    def rows() -> list[JobRun]:
        return [
            JobRun(
                job=job.name,
                slot=slot,
                trigger=JobRun.Trigger.SCHEDULE,
                node=node,
                node_instance=instance,
                **_claimed_as(queued),
            )
            for job, slot, _ in claims
        ]

    def advance_all() -> None:
        by_next: dict[datetime, list[str]] = {}
        for job, _, next_due in claims:
            by_next.setdefault(next_due, []).append(job.name)
        for next_due, names in by_next.items():
            _advance(names, next_due)

    try:
        with transaction.atomic():
            created = _insert_claims(rows())
            advance_all()
        if all(run.pk is not None for run in created):
            return {run.job: run for run in created}
    except IntegrityError:
        # Another node holds one of these slots (a stale leader's plan, a split second of
        # two leaders): claim the rest and read back which rows are ours.
        with transaction.atomic():
            JobRun.objects.bulk_create(rows(), ignore_conflicts=True)
            advance_all()
    wanted = {(job.name, slot) for job, slot, _ in claims}
    mine = JobRun.objects.filter(
        job__in=[job.name for job, _, _ in claims],
        slot__in={slot for _, slot, _ in claims},
        node_instance=instance,
        status=JobRun.Status.QUEUED if queued else JobRun.Status.RUNNING,
    )
    return {run.job: run for run in mine if (run.job, run.slot) in wanted}
