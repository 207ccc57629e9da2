"""How runs end: a run's outcome on its row and on its job's state, conditional on the run
still being this attempt's.
"""

from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Now

from coordination import quoting
from coordination.conf import settings
from coordination.ledger.claims import awaiting_retry
from coordination.ledger.states import request_served, wakeup_served
from coordination.models import JobRun, JobState
from coordination.registry import Job

MAX_ERROR_LENGTH = 20_000


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


def record_succeeded(run: JobRun, job: Job, outcome: RunOutcome) -> None:
    """Record a transactional run's success inside its own transaction: the run's row and the
    job's state (a success pauses nothing)."""
    JobRun.objects.filter(pk=run.pk).update(
        status=JobRun.Status.SUCCEEDED, duration=outcome.duration, finished_at=Now()
    )
    record_outcome_in_state(job, outcome)


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
            JobRun.objects.filter(awaiting_retry(), pk=retry_of.pk).update(
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


def fail_overrun(run: JobRun, job: Job, outcome: RunOutcome, *, instance: str) -> bool:
    """Record a run whose worker process its pool killed past the run's hard limit: failed,
    with ``outcome``'s error, and the job's state with it; return False if the row was no
    longer that process's attempt.

    The row is the killed process's (running under its ``instance``) or, for a transactional
    run that the kill rolled back, queued again for the same attempt: either way no one else
    has taken it, so the outcome is this attempt's.
    """
    with transaction.atomic():
        written = (
            JobRun.objects.filter(pk=run.pk, attempt=run.attempt)
            .filter(
                Q(status=JobRun.Status.RUNNING, node_instance=instance)
                | Q(status=JobRun.Status.QUEUED)
            )
            .update(**_finish_values(outcome), node=outcome.node, node_instance=instance)
        )
        if not written:
            return False
        record_outcome_in_state(job, outcome)
    return True


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
        values.update(wakeup_served(outcome.wake_before))
    if outcome.manual_requested_at is not None:
        values.update(request_served(outcome.manual_requested_at))
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
    run_sql, run_params = quoting.update_sql(run_rows, run_values)
    state_sql, state_params = quoting.update_sql(
        JobState.objects.filter(name=job.name), state_values
    )
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


def finishes_together(outcome: RunOutcome) -> bool:
    """Return whether :func:`finish_many` writes ``outcome`` with others in one statement:
    a success that serves no wake-up or run-now request (a scheduled slot, the bulk of a
    burst), with no error text or retry time to write. Any other outcome is written as
    :func:`finish_with_state` writes it, alone."""
    return (
        outcome.succeeded
        and not outcome.error
        and outcome.retry_at is None
        and outcome.wake_before is None
        and outcome.manual_requested_at is None
    )


def finish_many(
    finishes: list[tuple[JobRun, Job, RunOutcome]], *, instance: str
) -> list[bool | None]:
    """Record many claimed runs' outcomes and their jobs' states; return, for each, what
    :func:`finish_with_state` returns (whether it paused the job, ``None`` if the run was
    no longer this attempt's).

    On PostgreSQL the successes of distinct jobs (:func:`finishes_together`) are one
    statement: each run's row under the same condition as :func:`finish_with_state` (still
    this node's attempt, running or timed out), each job's state only if its run's row was
    written, all of them or none. Every other outcome, and everywhere else, each is written
    alone.
    """
    results: list[bool | None] = [None] * len(finishes)
    together: list[int] = []
    if connection.vendor == "postgresql":
        jobs: set[str] = set()
        for i, (_, job, outcome) in enumerate(finishes):
            if finishes_together(outcome) and job.name not in jobs:
                jobs.add(job.name)
                together.append(i)
    if together:
        written = _finish_successes([finishes[i] for i in together], instance=instance)
        for i in together:
            results[i] = False if finishes[i][0].pk in written else None
    alone = set(range(len(finishes))) - set(together)
    for i in sorted(alone):
        run, job, outcome = finishes[i]
        results[i] = finish_with_state(run, job, outcome, instance=instance)
    return results


def _finish_successes(finishes: list[tuple[JobRun, Job, RunOutcome]], *, instance: str) -> set[int]:
    """Write successes of distinct jobs in one PostgreSQL statement (:func:`finish_many`);
    return the ids of the runs written.

    The values :func:`_finish_values` and :func:`_state_values` give one run, here per row
    from arrays: a success clears the error and the retry time, counts no failure, and moves
    the next slot only when the outcome says so (``next_due`` or ``no_next_slot``).
    """
    run_table, state_table = quoting.table(JobRun), quoting.table(JobState)

    def run_col(name: str) -> str:
        return quoting.column(JobRun, name)

    def state_col(name: str) -> str:
        return quoting.column(JobState, name)

    sql = (
        "WITH v AS (SELECT * FROM unnest(%s::bigint[], %s::integer[], %s::double precision[],"
        " %s::varchar[], %s::timestamptz[], %s::double precision[], %s::timestamptz[],"
        " %s::boolean[], %s::varchar[])"
        " AS v(id, attempt, duration, job, slot, lateness, next_due, moves, node)),"
        f" finished AS (UPDATE {run_table} AS r SET {run_col('status')} = %s,"
        f" {run_col('finished_at')} = STATEMENT_TIMESTAMP(), {run_col('duration')} = v.duration,"
        f" {run_col('error')} = '', {run_col('retry_at')} = NULL FROM v"
        f" WHERE r.{run_col('id')} = v.id AND r.{run_col('attempt')} = v.attempt"
        f" AND r.{run_col('node_instance')} = %s AND r.{run_col('status')} IN (%s, %s)"
        " RETURNING v.*),"
        f" state AS (UPDATE {state_table} AS s SET {state_col('last_slot')} = f.slot,"
        f" {state_col('last_status')} = %s, {state_col('last_error')} = '',"
        f" {state_col('last_duration')} = f.duration,"
        f" {state_col('last_lateness')} = f.lateness,"
        f" {state_col('last_finished_at')} = STATEMENT_TIMESTAMP(),"
        f" {state_col('last_node')} = f.node, {state_col('consecutive_failures')} = 0,"
        f" {state_col('next_due')} = CASE WHEN f.moves THEN f.next_due"
        f" ELSE s.{state_col('next_due')} END"
        f" FROM finished AS f WHERE s.{state_col('name')} = f.job RETURNING 1)"
        " SELECT id FROM finished"
    )
    outcomes = [outcome for _, _, outcome in finishes]
    params = (
        [run.pk for run, _, _ in finishes],
        [run.attempt for run, _, _ in finishes],
        [outcome.duration for outcome in outcomes],
        [job.name for _, job, _ in finishes],
        [outcome.slot for outcome in outcomes],
        [outcome.lateness for outcome in outcomes],
        [outcome.next_due for outcome in outcomes],
        [outcome.next_due is not None or outcome.no_next_slot for outcome in outcomes],
        [outcome.node for outcome in outcomes],
        JobRun.Status.SUCCEEDED,
        instance,
        JobRun.Status.RUNNING,
        JobRun.Status.TIMED_OUT,
        JobRun.Status.SUCCEEDED,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}
