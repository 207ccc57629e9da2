"""Claims of slots: the ledger rows that make a slot run once (``INSERT`` under the unique
``(job, slot)``), retries taking a row again, and runs queued for and taken by worker processes.
"""

from datetime import datetime
from functools import reduce
from operator import or_

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Now

from coordination import quoting
from coordination.ledger.states import advance_jobs
from coordination.models import JobRun, JobState
from coordination.registry import Job


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


def awaiting_retry() -> Q:
    """Runs another attempt may take: abandoned ones, and failed ones with a retry time."""
    return Q(status=JobRun.Status.ABANDONED) | Q(
        status=JobRun.Status.FAILED, retry_at__isnull=False
    )


def claim_retry(run: JobRun, *, node: str, instance: str, queued: bool = False) -> bool:
    """Take an abandoned or failed run for another attempt (``queued``: queue it for a worker
    process); return False if someone else did."""
    return bool(
        JobRun.objects.filter(awaiting_retry(), pk=run.pk).update(
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


def take_queued_batch(runs: list[JobRun], *, node: str, instance: str) -> dict[int, JobRun]:
    """Start many queued runs on this worker process at once: :func:`take_queued` for each
    of ``runs``, in one conditional ``UPDATE`` (on PostgreSQL returning the rows it moved; a
    read of them elsewhere); return the runs this worker now holds, by id (each still queued
    for its attempt when it moved)."""
    if not runs:
        return {}
    if connection.vendor == "postgresql":
        pairs = [(run.pk, run.attempt) for run in runs]
        return _start_queued_pairs(pairs, node=node, instance=instance)
    condition = reduce(or_, (Q(pk=run.pk, attempt=run.attempt) for run in runs))
    JobRun.objects.filter(condition, status=JobRun.Status.QUEUED).update(
        status=JobRun.Status.RUNNING, node=node, node_instance=instance, started_at=Now()
    )
    taken = JobRun.objects.filter(condition, status=JobRun.Status.RUNNING, node_instance=instance)
    return {run.pk: run for run in taken}


def startable_sql(
    source: str,
    source_params: tuple,
    *,
    jobs: list[str],
    node: str,
    instance: str,
    returning: str = "",
    keys: str,
) -> tuple[str, tuple]:
    """Return the SQL and parameters of one PostgreSQL ``UPDATE ... RETURNING`` that starts, of
    the runs ``source`` names, those a worker's batch would start after reading them: queued
    for the attempt named, of one of ``jobs`` (the claim-first jobs the worker declares), and
    not held back by a pause (``workers.execution.skip_reason``: a paused job's runs wait, a
    run-now request runs all the same). Each run comes back with its columns, its job's
    ``next_due`` as the leader queued it, and ``returning``'s; the caller reads the runs not
    returned and decides on them as before.

    ``source`` is a ``FROM`` item ``t`` with columns ``id`` and ``attempt`` (and whatever
    ``returning`` names): in a worker's take, the tasks the same statement takes, so that a
    burst's runs start with no round trip, and no Python, between the take and their start.

    The runs are found by their primary keys alone, ``keys`` (SQL of an array of them), never
    through the index on the status: the planner can count neither the rows of ``source``
    nor, until the ledger is analyzed again, the runs a burst has just queued, and would
    otherwise scan every queued run for each one to start.
    """
    state_table = quoting.table(JobState)
    job, trigger = quoting.column(JobRun, "job"), quoting.column(JobRun, "trigger")
    state_of_run = f"s.{quoting.column(JobState, 'name')} = r.{job}"
    startable = (
        f" AND r.{quoting.column(JobRun, 'id')} = ANY({keys})"
        f" AND r.{job} = ANY(%s::text[]) AND (r.{trigger} = %s OR NOT EXISTS"
        f" (SELECT 1 FROM {state_table} s WHERE {state_of_run}"
        f" AND s.{quoting.column(JobState, 'paused')}))"
    )
    next_due = (
        f", (SELECT s.{quoting.column(JobState, 'next_due')} FROM {state_table} s"
        f" WHERE {state_of_run}) AS next_due{returning}"
    )
    return _start_queued_sql(
        source,
        source_params,
        node=node,
        instance=instance,
        where=startable,
        where_params=(list(jobs), JobRun.Trigger.MANUAL),
        returning=next_due,
        status_indexed=False,
    )


#: The runs :func:`take_queued_batch` starts on PostgreSQL: (id, attempt) pairs as two arrays.
PAIRS = "unnest(%s::bigint[], %s::integer[]) AS t(id, attempt)"


def _start_queued_pairs(
    pairs: list[tuple[int, int]], *, node: str, instance: str
) -> dict[int, JobRun]:
    """Move the runs of ``pairs`` (id, attempt) still queued for that attempt to running on
    this worker process, in one statement (:func:`_start_queued_sql`); return them by id.

    A condition of one ``Q(pk=..., attempt=...)`` per run costs Django milliseconds to build
    and compile for a batch of a hundred runs, twice (the update and the read back), on the
    thread that takes the next batch; two arrays cost it nothing.
    """
    source_params = ([run_id for run_id, _ in pairs], [attempt for _, attempt in pairs])
    sql, params = _start_queued_sql(PAIRS, source_params, node=node, instance=instance)
    return {run.pk: run for run in JobRun.objects.raw(sql, params)}


def _start_queued_sql(
    source: str,
    source_params: tuple,
    *,
    node: str,
    instance: str,
    where: str = "",
    where_params: tuple = (),
    returning: str = "",
    status_indexed: bool = True,
) -> tuple[str, tuple]:
    """Return the SQL and parameters of the PostgreSQL ``UPDATE ... FROM source ...
    RETURNING r.*`` (and ``returning``'s columns) that moves the runs ``source`` names (``t``:
    ``id`` and ``attempt``) still queued for that attempt, and meeting ``where`` (more
    conditions on ``r``, the run), to running on this worker process. ``started_at`` is the
    statement's time, as ``Now()`` writes it. Without ``status_indexed`` the status is
    compared as an expression that no index answers (the runs are found by other means)."""

    def column(name: str) -> str:
        return quoting.column(JobRun, name)

    status = f"r.{column('status')}" if status_indexed else f"(r.{column('status')} || '')"

    sql = (
        f"UPDATE {quoting.table(JobRun)} AS r SET {column('status')} = %s,"
        f" {column('node')} = %s, {column('node_instance')} = %s,"
        f" {column('started_at')} = STATEMENT_TIMESTAMP()"
        f" FROM {source}"
        f" WHERE r.{column('id')} = t.id AND r.{column('attempt')} = t.attempt"
        f" AND {status} = %s{where} RETURNING r.*{returning}"
    )
    params = (
        JobRun.Status.RUNNING,
        node,
        instance,
        *source_params,
        JobRun.Status.QUEUED,
        *where_params,
    )
    return sql, params


def skip_queued(run: JobRun, *, reason: str) -> bool:
    """Record a queued run that will not start (its job was paused meanwhile) as missed with
    ``reason``; return False if it was no longer queued."""
    skipped = JobRun.objects.filter(
        pk=run.pk, attempt=run.attempt, status=JobRun.Status.QUEUED
    ).update(status=JobRun.Status.MISSED, reason=reason, finished_at=Now())
    if skipped:
        JobState.objects.filter(name=run.job).update(missed_count=F("missed_count") + 1)
    return bool(skipped)


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
            advance_jobs(names, next_due)

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
