"""A worker process's claim of a batch: many ready tasks and their runs in a few statements.

A worker takes up to ``limit`` ready task rows of Instatic's queue in one ``SELECT ... FOR
UPDATE SKIP LOCKED`` (highest priority first, as django-tasks-db orders them) and marks them
running in one ``UPDATE``; it then reads their queued runs, and moves the claim-first ones
from ``queued`` to ``running`` in one conditional ``UPDATE`` (``ledger.take_queued_batch``,
as the leader's batch claim does). On PostgreSQL the take, the worker's heartbeat and the
start of the runs that may start unread are one statement (``workers.postgresql_take``); the
rest of the batch is read and decided on as here. The ledger still decides: a run moves only
if it is still queued for the task's attempt, so a task delivered twice, or a second worker,
finds it taken.

Only a task whose ``task_path`` is Instatic's own run task is ever executed, and the path is
checked before anything is imported: a foreign row in the queue is failed with the reason,
never imported (importing runs a module's code).

:func:`decide_batch` (pure) says what becomes of each task taken; the functions below it read
and write the task rows (the ledger's rows are written by ``coordination.ledger`` only).
"""

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import connection
from django.db.models.functions import Now

from coordination.models import JobRun, JobState, Node
from coordination.quoting import among
from coordination.workers.execution import Delivery, skip_reason

logger = logging.getLogger(__name__)

#: The error a task row is failed with when it is not Instatic's run task.
FOREIGN_TASK = "refused without importing it: {path!r} is not Instatic's run task ({expected!r})"


@dataclass(frozen=True)
class TakenTask:
    """A task row this worker took: its id, the run it carries (``None`` if its arguments
    are not a run's id and attempt) and its ``task_path``, as stored (never imported).

    ``started`` is its run when the take started it too, unread (``workers.postgresql_take``,
    with its job's ``next_due``); ``None``: the run is read and decided on at dispatch.
    """

    id: uuid.UUID
    run: tuple[int, int] | None
    task_path: str
    started: JobRun | None = None

    @property
    def pk(self) -> uuid.UUID:
        return self.id


@dataclass
class BatchPlan:
    """What becomes of each task of a batch (:func:`decide_batch`)."""

    #: Tasks failed without being imported: (task, why).
    refused: list[tuple[TakenTask, str]] = field(default_factory=list)
    #: Claim-first runs to move to running together: (task, queued run).
    start: list[tuple[TakenTask, JobRun]] = field(default_factory=list)
    #: Transactional runs, each taken inside its own run's transaction: (task, queued run).
    transactional: list[tuple[TakenTask, JobRun]] = field(default_factory=list)
    #: Runs recorded missed without starting (their job was paused): (task, run, reason).
    skipped: list[tuple[TakenTask, JobRun, str]] = field(default_factory=list)
    #: Tasks finished at once with this outcome: (task, outcome).
    done: list[tuple[TakenTask, str]] = field(default_factory=list)


def parse_run(args_kwargs: object) -> tuple[int, int] | None:
    """Return the (run id, attempt) a task's stored arguments carry, or ``None``."""
    try:
        run_id, attempt = args_kwargs["args"][:2]  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        return None
    if not _whole(run_id, BIGINT_LIMIT) or not _whole(attempt, INTEGER_LIMIT):
        return None
    return run_id, attempt


#: The first whole numbers past what a run's id (``bigint``) and attempt (``integer``) hold.
BIGINT_LIMIT, INTEGER_LIMIT = 2**63, 2**31


def _whole(value: object, limit: int) -> bool:
    """Whether ``value`` is a whole number from 1 to below ``limit`` (not a bool, which
    Python counts as one)."""
    return type(value) is int and 0 < value < limit


def decide_batch(
    tasks: Iterable[TakenTask],
    runs: dict[int, JobRun],
    states: dict[str, JobState],
    *,
    expected_path: str,
    transactional: Callable[[str], bool | None],
) -> BatchPlan:
    """Decide what becomes of each task taken.

    ``runs`` are the queued runs found for the tasks (by id), ``states`` their jobs' states
    (by name), ``transactional(job)`` says whether this process declares the
    job transactional (``None``: not declared here, a deploy in progress: the run stays
    queued). A run no longer queued for the task's attempt was taken by another delivery.
    """
    plan = BatchPlan()
    seen: set[int] = set()
    for task in tasks:
        if task.task_path != expected_path:
            reason = FOREIGN_TASK.format(path=task.task_path, expected=expected_path)
            plan.refused.append((task, reason))
            continue
        if task.run is None:
            plan.refused.append((task, "refused: its arguments are not a run's id and attempt"))
            continue
        run_id, attempt = task.run
        run = runs.get(run_id)
        if (
            run is None
            or run.attempt != attempt
            or run.status != JobRun.Status.QUEUED
            or run_id in seen  # the same run twice in one batch: the first delivery has it
        ):
            plan.done.append((task, Delivery.TAKEN))
            continue
        seen.add(run_id)
        kind = transactional(run.job)
        if kind is None:
            plan.done.append((task, Delivery.UNKNOWN))
            continue
        reason = skip_reason(run, states.get(run.job))
        if reason is not None:
            plan.skipped.append((task, run, reason))
        elif kind:
            plan.transactional.append((task, run))
        else:
            plan.start.append((task, run))
    return plan


def ready_task_rows(queue_name: str, backend: str):
    """The queue's ready task rows, as django-tasks-db's own worker finds them."""
    from django_tasks_db.models import DBTaskResult

    return DBTaskResult.objects.ready().filter(queue_name=queue_name, backend_name=backend)


def has_ready_tasks(*, queue_name: str, backend: str) -> bool:
    """Return whether any task of the queue is ready: one ``SELECT``, no transaction."""
    return ready_task_rows(queue_name, backend).exists()


def count_outstanding(*, queue_name: str, backend: str, most: int) -> tuple[int, int, int]:
    """Return how many tasks of the queue are ready and how many worker processes hold
    (running), each counted up to ``most``, and how many worker processes are live (not
    stopped): one ``SELECT``, no transaction (each count a round trip of its own cost a busy
    machine's claims a scheduling wait each)."""
    from django_tasks_db.models import DBTaskResult

    ready = ready_task_rows(queue_name, backend).values("id")[:most]
    taken = DBTaskResult.objects.filter(
        queue_name=queue_name, backend_name=backend, status="RUNNING"
    ).values("id")[:most]
    workers = Node.objects.filter(role=Node.Role.WORKER, stopped_at__isnull=True).values("pk")
    parts, params = [], []
    for name, queryset in (("ready", ready), ("taken", taken), ("workers", workers)):
        sql, part_params = queryset.query.sql_with_params()
        parts.append(f"(SELECT COUNT(*) FROM ({sql}) AS {name})")
        params.extend(part_params)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(parts)}", params)
        ready_count, taken_count, worker_count = cursor.fetchone()
    return ready_count, taken_count, worker_count


def take_ready_tasks(
    *, queue_name: str, backend: str, limit: int, worker_id: str
) -> list[TakenTask]:
    """Lock up to ``limit`` ready tasks for the caller's transaction, highest priority first,
    skipping rows other workers hold, and mark them running for this worker
    (:func:`lock_ready_tasks`, :func:`mark_tasks_running`). On PostgreSQL a worker takes them
    with its heartbeat and their runs' start in one statement instead
    (``workers.postgresql_take``).
    """
    tasks = lock_ready_tasks(queue_name=queue_name, backend=backend, limit=limit)
    mark_tasks_running(tasks, worker_id=worker_id)
    return tasks


def lock_ready_tasks(*, queue_name: str, backend: str, limit: int) -> list[TakenTask]:
    """Lock up to ``limit`` ready tasks for the caller's transaction, highest priority first,
    skipping rows other workers hold (one statement)."""
    rows = (
        ready_task_rows(queue_name, backend)
        .select_for_update(skip_locked=True)
        .values_list("id", "args_kwargs", "task_path")[:limit]
    )
    return [TakenTask(id=i, run=parse_run(args), task_path=path) for i, args, path in rows]


def mark_tasks_running(tasks: list[TakenTask], *, worker_id: str) -> None:
    """Mark locked ``tasks`` running for this worker (one statement).

    ``worker_ids`` holds this worker alone: a task is taken once (a task the sweep finds lost
    is failed and a new one made), and the sweep reads its last entry.
    """
    from django_tasks_db.models import DBTaskResult

    if tasks:
        DBTaskResult.objects.filter(id__in=among([t.id for t in tasks], "uuid")).update(
            status="RUNNING", started_at=Now(), worker_ids=[worker_id]
        )


#: What a queued run's start reads of its row (the rest is read with the run it becomes).
QUEUED_FIELDS = ("id", "job", "slot", "attempt", "status", "trigger", "requested_by")


def read_runs(tasks: list[TakenTask]) -> tuple[dict[int, JobRun], dict[str, JobState]]:
    """Return the queued runs the tasks carry (by id) and their jobs' states (by name, only
    what a start needs): two statements for the batch."""
    ids = [t.run[0] for t in tasks if t.run is not None]
    if not ids:
        return {}, {}
    queued = JobRun.objects.filter(pk__in=among(ids, "bigint"), status=JobRun.Status.QUEUED)
    runs = {r.pk: r for r in queued.only(*QUEUED_FIELDS)}
    if not runs:
        return runs, {}
    states = JobState.objects.filter(name__in=among({r.job for r in runs.values()}, "text")).only(
        "name", "paused", "paused_reason", "next_due"
    )
    return runs, {state.name: state for state in states}


def finish_tasks(outcomes: list[tuple[uuid.UUID, str]]) -> None:
    """Mark finished tasks successful with their outcome: one ``UPDATE`` per outcome (few:
    ``ran``, ``taken``, ...), not one per task."""
    from django_tasks_db.models import DBTaskResult

    by_outcome: dict[str, list[uuid.UUID]] = {}
    for task_id, outcome in outcomes:
        by_outcome.setdefault(outcome, []).append(task_id)
    for outcome, ids in by_outcome.items():
        DBTaskResult.objects.filter(id__in=ids, status="RUNNING").update(
            status="SUCCESSFUL",
            finished_at=Now(),
            return_value=outcome,
            exception_class_path="",
            traceback="",
        )


def fail_tasks(failures: list[tuple[uuid.UUID, str, str]]) -> None:
    """Mark tasks failed: (task id, exception class path, text), without importing them."""
    from django_tasks_db.models import DBTaskResult

    for task_id, class_path, text in failures:
        DBTaskResult.objects.filter(id=task_id, status="RUNNING").update(
            status="FAILED",
            finished_at=Now(),
            return_value=None,
            exception_class_path=class_path,
            traceback=text,
        )
