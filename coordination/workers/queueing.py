"""The leader's half of a run on workers: claim the slot as queued and enqueue its task.

Both in one transaction with the database backend (``django_tasks_db``): its task rows live
in the same database, so a claimed slot always has its task and a task always has its ledger
row; a leader killed between the two is impossible by construction (the transaction rolls
both back). The transaction is fenced like a leader's run (``fence_work_transaction``): a
leader that lost its lock queues nothing. With another django-tasks backend (a broker) the
tasks are enqueued once the claims commit, so the queue can miss a task only if the leader
dies between that commit and the enqueue; the sweep (``sweep.py``) queues such a run again
where it can see the queue, and the ledger keeps a task delivered twice from starting twice.
"""

import logging
import uuid

from django.db import connection, transaction

from coordination import ledger, quoting
from coordination.models import JobRun
from coordination.planner import RunPlan, plan_queueable_together
from coordination.priorities import TASK_PRIORITIES, Priority, task_priority
from coordination.registry import registry
from coordination.workers.meeting import WORKERS_CHANNEL
from coordination.workers.tasks import run_queued

logger = logging.getLogger(__name__)


def uses_database_queue() -> bool:
    """Return True if runs' tasks go to Django's own database (``django_tasks_db``), so that
    enqueueing them is part of the claim's transaction."""
    from django_tasks_db import DatabaseBackend

    return isinstance(run_queued.get_backend(), DatabaseBackend)


def queue_plans(plans: list[RunPlan], *, node, fence) -> list[JobRun]:
    """Claim ``plans``' slots as queued and enqueue their tasks, in one transaction; return
    the runs queued (a slot another node took, or a retry taken meanwhile, is left out).

    ``fence(connection)`` is the group lock's fence at commit; when it refuses, nothing is
    queued and the next leader plans the slots again.
    """
    with transaction.atomic():
        if not fence(connection):
            logger.warning("queueing %d run(s) refused: the group's lock was lost", len(plans))
            transaction.set_rollback(True)
            return []
        runs = _claim(plans, node=node)
        enqueue(runs)
        if runs:
            wake_workers()
    return runs


def _claim(plans: list[RunPlan], *, node) -> list[JobRun]:
    """Insert (or, for retries, take) the queued ledger rows of ``plans``."""
    batch = [plan for plan in plans if plan_queueable_together(plan)]
    claimed = ledger.claim_scheduled(
        [(plan.job, plan.slot, plan.next_due) for plan in batch],
        node=node.name,
        instance=node.instance,
        queued=True,
    )
    runs = [claimed[plan.job.name] for plan in batch if plan.job.name in claimed]
    for plan in plans:
        if plan_queueable_together(plan):
            continue
        if plan.retry_run is not None:
            run = ledger.take_retry(
                plan.retry_run, node=node.name, instance=node.instance, queued=True
            )
        else:
            run = ledger.claim(
                plan.job,
                plan.slot,
                trigger=plan.trigger,
                node=node.name,
                instance=node.instance,
                requested_by=plan.requested_by,
                queued=True,
            )
            ledger.slot_dealt_with(
                plan.job, plan.next_due, plan.manual_requested_at, wake_before=plan.wake_before
            )
        if run is not None:
            runs.append(run)
    return runs


def run_priority(job_name: str) -> int:
    """Return the django-tasks priority of a run of ``job_name`` (``coordination.priorities``:
    publishing's runs first, side effects last); a job this process does not declare gets
    the middle one."""
    job = registry.get(job_name)
    if job is None:
        return TASK_PRIORITIES[Priority.JOBS]
    return task_priority(job)


def enqueue(runs: list[JobRun]) -> None:
    """Enqueue the task of each queued run, with its job's priority: in the caller's
    transaction on the database queue (one ``INSERT`` for all of them), else once that
    transaction commits."""
    if not runs:
        return
    if not uses_database_queue():
        for run in runs:
            args = (run.pk, run.attempt)
            task = run_queued.using(priority=run_priority(run.job))
            transaction.on_commit(lambda task=task, args=args: task.enqueue(*args))
        return
    if connection.vendor == "postgresql":
        _insert_tasks_from_arrays(runs)
    else:
        _insert_tasks(runs)


def _task_fields() -> dict:
    """Return the fields every run's task row shares (what ``Task.enqueue`` would write)."""
    from django_tasks_db.models import get_date_max

    return {
        "task_path": run_queued.module_path,
        "queue_name": run_queued.queue_name,
        "backend_name": run_queued.backend,
        "run_after": get_date_max(),
    }


def _insert_tasks(runs: list[JobRun]) -> None:
    """Insert the runs' task rows with one ``bulk_create``."""
    from django_tasks_db.compat import normalize_json
    from django_tasks_db.models import DBTaskResult

    shared = _task_fields()
    DBTaskResult.objects.bulk_create(
        [
            DBTaskResult(
                id=uuid.uuid4(),
                args_kwargs=normalize_json({"args": [run.pk, run.attempt], "kwargs": {}}),
                priority=run_priority(run.job),
                **shared,
            )
            for run in runs
        ]
    )


def _insert_tasks_from_arrays(runs: list[JobRun]) -> None:
    """Insert the runs' task rows as :func:`_insert_tasks` does, in one PostgreSQL statement
    over three arrays (runs, attempts, priorities), the ids drawn by the server.

    A burst queues a thousand runs in the leader's transaction, which workers wait for:
    ``bulk_create`` spends about 0.1 s of Python on a thousand rows of thirteen columns,
    the arrays nothing (and a thousand ``uuid4()`` calls some 9 ms, ``gen_random_uuid()``
    nothing). ``test_worker_batches`` checks that both write the same rows.
    """
    from django_tasks_db.compat import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    shared = _task_fields()
    columns = ", ".join(
        quoting.column(DBTaskResult, name)
        for name in (
            "id", "status", "enqueued_at", "args_kwargs", "priority", "task_path",
            "worker_ids", "queue_name", "backend_name", "run_after", "exception_class_path",
            "traceback",
        )
    )  # fmt: skip
    sql = (
        f"INSERT INTO {quoting.table(DBTaskResult)} ({columns})"
        " SELECT gen_random_uuid(), %s, STATEMENT_TIMESTAMP(),"
        " jsonb_build_object('args', jsonb_build_array(t.run, t.attempt), 'kwargs', '{}'::jsonb),"
        " t.priority, %s, '[]'::jsonb, %s, %s, %s, '', ''"
        " FROM unnest(%s::bigint[], %s::integer[], %s::integer[]) AS t(run, attempt, priority)"
    )
    params = (
        TaskResultStatus.READY,
        shared["task_path"],
        shared["queue_name"],
        shared["backend_name"],
        shared["run_after"],
        [run.pk for run in runs],
        [run.attempt for run in runs],
        [run_priority(run.job) for run in runs],
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def wake_workers() -> None:
    """Wake idle worker processes when the surrounding transaction commits (PostgreSQL's
    ``NOTIFY``); elsewhere they poll every ``INSTATIC_WORKER_POLL`` seconds."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [WORKERS_CHANNEL])
