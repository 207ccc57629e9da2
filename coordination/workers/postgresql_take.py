"""A worker process's take on PostgreSQL: its heartbeat, the tasks it takes and the start of
their runs in one statement, committed on its own.

Done one after another, these are five round trips (``BEGIN``, the heartbeat, the take, the
start, ``COMMIT``) with Python between them. On a busy machine each is a wait for a core,
and a burst's runs start only once the last of them has run: as one statement, a run starts
when the statement does (``started_at`` is its ``STATEMENT_TIMESTAMP()``).

The statement's parts, each a ``WITH`` of the one statement (so one snapshot, one commit):

- ``ready``: whether any task is ready at all; a look that finds none writes nothing;
- ``beat``: the worker's heartbeat, written only if a task is ready and while its node's row
  is live (not fenced);
- ``taken``: up to ``limit`` ready tasks, locked with ``SKIP LOCKED`` and marked running for
  this worker, as ``claiming.take_ready_tasks`` does elsewhere; none unless ``beat`` wrote;
- ``started``: the runs of the taken tasks that may start unread (``ledger.startable_sql``).

A task whose stored arguments are not two whole numbers, or whose path is not Instatic's
run task, starts nothing here: it is read and decided on at dispatch, never imported
(``claiming.decide_batch``). The arguments are only compared as text before they are cast,
so no row of the queue can make the statement fail, and they are parsed there once: the
statement returns each task's run as it read it.
"""

from typing import NamedTuple

from django.db.models.expressions import RawSQL
from django.db.models.functions import Now

from coordination import ledger, quoting
from coordination.models import JobRun
from coordination.workers.claiming import TakenTask, ready_task_rows

#: The runs a take may start, from the tasks it takes (``taken``): each task's id, and its
#: run's id and attempt, each a JSON number written as at most 18 (9) digits, else NULL (the
#: run starts nothing). Materialized: each task's arguments are parsed once, not once for
#: every run the planner compares them with.
TAKEN_RUNS = (
    "SELECT k.id AS task_id,"
    " CASE WHEN jsonb_typeof(k.a->0) = 'number' AND k.a->>0 ~ '^[0-9]{1,18}$'"
    " THEN (k.a->>0)::bigint END AS id,"
    " CASE WHEN jsonb_typeof(k.a->1) = 'number' AND k.a->>1 ~ '^[0-9]{1,9}$'"
    " THEN (k.a->>1)::integer END AS attempt"
    " FROM (SELECT id, CASE WHEN jsonb_typeof(args_kwargs) = 'object'"
    " AND jsonb_typeof(args_kwargs->'args') = 'array' THEN args_kwargs->'args' END AS a"
    " FROM taken WHERE task_path = %s) AS k"
)

#: What the statement returns of each task taken (its fields, by the names they come back
#: under), before the columns of its run if it started.
TASK_COLUMNS = {
    "id": "instatic_task_id",
    "args_kwargs": "instatic_task_args",
    "task_path": "instatic_task_path",
    "priority": "instatic_task_priority",
    "run_after": "instatic_task_run_after",
    "enqueued_at": "instatic_task_enqueued_at",
}


def take_statement(
    *,
    queue_name: str,
    backend: str,
    limit: int,
    worker_id: str,
    beat: tuple[str, tuple],
    jobs: list[str],
    node: str,
    instance: str,
    expected_path: str,
) -> tuple[str, tuple]:
    """Return the SQL and parameters of the one statement that writes this worker's
    heartbeat (``beat``: its ``UPDATE``), takes up to ``limit`` ready tasks for it and
    starts those of their runs that may start unread (of one of ``jobs``, the claim-first
    jobs it declares), as :func:`take_and_start` runs it."""
    from django_tasks_db.models import DBTaskResult

    beat_sql, beat_params = beat
    any_sql, any_params = (
        ready_task_rows(queue_name, backend).values("id")[:1].query.sql_with_params()
    )
    # The ready rows' ids, locked past those other workers hold (``select_for_update`` as
    # Django compiles it only inside a transaction, which this statement is on its own).
    ready_sql, ready_params = (
        ready_task_rows(queue_name, backend).values("id")[:limit].query.sql_with_params()
    )
    locked = RawSQL(f"{ready_sql} FOR UPDATE SKIP LOCKED", ready_params)
    take_sql, take_params = quoting.update_sql(
        DBTaskResult.objects.filter(id__in=locked),
        {"status": "RUNNING", "started_at": Now(), "worker_ids": [worker_id]},
    )
    columns = {quoting.column(DBTaskResult, name): alias for name, alias in TASK_COLUMNS.items()}
    start_sql, start_params = ledger.startable_sql(
        "pairs AS t",
        (),
        jobs=jobs,
        node=node,
        instance=instance,
        returning=", t.task_id AS instatic_started_by",
        keys="ARRAY(SELECT id FROM pairs)",
    )
    returned = ", ".join(f"k.{column} AS {alias}" for column, alias in columns.items())
    sql = (
        f"WITH ready AS (SELECT EXISTS ({any_sql}) AS seen),"
        f" beat AS ({beat_sql} AND (SELECT seen FROM ready) RETURNING 1),"
        f" taken AS ({take_sql} AND EXISTS (SELECT 1 FROM beat) RETURNING {', '.join(columns)}),"
        f" pairs AS MATERIALIZED ({TAKEN_RUNS}),"
        f" started AS ({start_sql})"
        " SELECT (SELECT seen FROM ready) AS instatic_ready, b.live AS instatic_live,"
        f" {returned}, p.id AS instatic_run_id, p.attempt AS instatic_run_attempt, s.*"
        " FROM (SELECT count(*) AS live FROM beat) AS b"
        " LEFT JOIN taken AS k ON true"
        " LEFT JOIN pairs AS p ON p.task_id = k.id"
        " LEFT JOIN started AS s ON s.instatic_started_by = k.id"
    )
    return sql, (*any_params, *beat_params, *take_params, expected_path, *start_params)


def _run_of(row) -> tuple[int, int] | None:
    """The (run id, attempt) the statement read from a task's arguments, or ``None``."""
    if row.instatic_run_id is None or row.instatic_run_attempt is None:
        return None
    return row.instatic_run_id, row.instatic_run_attempt


class Take(NamedTuple):
    """What a take found: whether a task was ready, whether its heartbeat was written (a
    task was ready and the worker is live: not ``written`` while ``ready`` means fenced), and
    the tasks it took, highest priority first."""

    ready: bool
    written: bool
    tasks: list[TakenTask]


def take_and_start(**options) -> Take:
    """Write this worker's heartbeat, take ready tasks and start the runs that may start
    unread, each riding on its task as ``started``, in one statement (:func:`take_statement`,
    whose ``options`` these are); when no task is ready, write nothing."""
    rows = list(JobRun.objects.raw(*take_statement(**options)))
    taken = [row for row in rows if row.instatic_task_id is not None]
    # The order the tasks are started in: the queue's own (highest priority first).
    taken.sort(
        key=lambda row: (
            -row.instatic_task_priority,
            row.instatic_task_run_after,
            row.instatic_task_enqueued_at,
        )
    )
    tasks = [
        TakenTask(
            id=row.instatic_task_id,
            run=_run_of(row),
            task_path=row.instatic_task_path,
            started=row if row.pk is not None else None,
        )
        for row in taken
    ]
    return Take(
        ready=bool(rows[0].instatic_ready), written=bool(rows[0].instatic_live), tasks=tasks
    )
