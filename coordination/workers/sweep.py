"""The leader's watch over runs on workers: nothing queued is lost, nothing stays stuck.

While runs of its group are queued or running on workers, the leader sweeps every half
lease (``maintenance.Maintenance.sweep``):

- a worker process whose heartbeat stopped while it had work (SIGKILL, SIGSTOP, a lost
  host) is fenced: its database sessions are ended, so a transaction it still has open
  rolls back and cannot commit later;
- a task row its worker left ``RUNNING`` is marked failed (the database backend's own worker
  never does), so no task row stays running forever;
- a claim-first run of a dead worker is marked abandoned, and the job's retry policy
  applies as for any abandoned run;
- a queued run without a live task (its worker died inside a transactional run, which
  rolled back to ``queued``) gets a new task: the slot runs again, as a transactional slot
  of a dead leader does.

Between sweeps, while runs are out, the leader also watches (``watch()``, every
``maintenance.WATCH_INTERVAL`` at most): a worker process killed, or its node, keeps a fresh
heartbeat for up to a lease, but the server closes its sessions at once; one look at them
releases its runs within a second, as a killed leader's are, and the sweep follows at once.

The decisions are the pure functions at the top; ``sweep()`` and ``watch()`` read and write.
"""

import logging
import uuid
from dataclasses import dataclass

from django.db import transaction

from coordination import ledger, liveness
from coordination.clock import database_now
from coordination.models import JobRun, Node
from coordination.registry import Job
from coordination.selectors import live_instances, live_nodes_q
from coordination.workers.queueing import enqueue, uses_database_queue, wake_workers
from coordination.workers.tasks import QUEUE_NAME, run_queued

logger = logging.getLogger(__name__)

#: The error a task row of a dead worker is failed with.
WORKER_LOST = "its worker process stopped heartbeating while it ran this task"
#: Why a run is abandoned whose worker process is no node any more (its pool started another
#: process under its name).
WORKER_REPLACED = "its worker process is gone (another took its place)"
#: Why a run is abandoned whose worker process is marked stopped: found gone, or fenced, by
#: the watch or sweep of another group's leader, or stopped past its grace.
WORKER_STOPPED = "its worker process is gone (marked stopped with the run in hand)"


@dataclass(frozen=True)
class Task:
    """A task row of Instatic's queue that is not finished, as the sweep sees it."""

    id: uuid.UUID
    status: str
    run: tuple[int, int]  # (run id, attempt)
    worker: str  # the instance of the worker that took it ("" while ready)


def lost_tasks(tasks: list[Task], live: set[str]) -> list[uuid.UUID]:
    """Return the running tasks whose worker process is not live."""
    return [t.id for t in tasks if t.status == "RUNNING" and t.worker not in live]


def stranded_runs(queued: list[tuple[int, int]], tasks: list[Task], lost: set) -> list:
    """Return the queued runs (id, attempt) that no ready or running task will execute."""
    covered = {t.run for t in tasks if t.id not in lost}
    return [run for run in queued if run not in covered]


def workers_to_fence(stale: dict[str, str], tasks: list[Task], running: set[str]) -> dict:
    """Return the stale worker processes (instance: node name) that still had work: a task
    taken or a run in progress. An idle worker is stale by design (it writes nothing)."""
    busy = {t.worker for t in tasks if t.status == "RUNNING"} | running
    return {instance: name for instance, name in stale.items() if instance in busy}


def departed(others: set[str], rows: dict[str, bool]) -> dict[str, set[str]]:
    """Sort the processes ``others`` (not live, with runs in progress) by why their runs can
    be released at once, given ``rows`` (instance: whether its node row is marked stopped, for
    those that have a row): ``replaced`` (no row: its pool started another under its name)
    and ``stopped`` (found gone or fenced by another group's leader, or stopped). A process
    whose heartbeat merely ran out is in neither: the sweep fences it first."""
    return {
        "replaced": {instance for instance in others if instance not in rows},
        "stopped": {instance for instance in others if rows.get(instance)},
    }


def _open_tasks() -> list[Task]:
    from django_tasks_db.models import DBTaskResult

    rows = DBTaskResult.objects.filter(
        queue_name=QUEUE_NAME,
        backend_name=run_queued.backend,
        status__in=["READY", "RUNNING"],
    ).values_list("id", "status", "args_kwargs", "worker_ids")
    return [
        Task(
            id=task_id,
            status=status,
            run=tuple(args["args"][:2]),
            worker=(workers or [""])[-1],
        )
        for task_id, status, args, workers in rows
    ]


def _fail_tasks(task_ids: list[uuid.UUID]) -> None:
    from django_tasks_db.models import DBTaskResult

    for task in DBTaskResult.objects.filter(id__in=task_ids, status="RUNNING"):
        task.set_failed(RuntimeError(WORKER_LOST))


def sweep(jobs: list[Job]) -> int:
    """Sweep the runs on workers of ``jobs``; return how many are still outstanding
    (queued or running), so the caller knows whether to sweep again.

    Stale workers are fenced first, from plain reads: on MariaDB an ``UPDATE`` of the ledger
    (abandoning runs) would wait on the row lock a frozen worker's open transaction holds,
    and so would never get to fencing it. Which workers are live is judged at one instant
    of the database's clock for both: a worker whose lease runs out between the two reads
    is not left unfenced with its runs abandoned.
    """
    job_names = [job.name for job in jobs]
    if not job_names:
        return 0
    outstanding = JobRun.objects.filter(JobRun.outstanding(), job__in=job_names)
    database_queue = uses_database_queue()
    tasks = _open_tasks() if database_queue else []
    running = set(
        outstanding.filter(status=JobRun.Status.RUNNING).values_list("node_instance", flat=True)
    )
    now = database_now()
    stale = dict(
        Node.objects.filter(role=Node.Role.WORKER, stopped_at__isnull=True)
        .exclude(live_nodes_q(now))
        .values_list("instance", "name")
    )
    for instance, name in workers_to_fence(stale, tasks, running).items():
        ended = liveness.terminate_work_sessions(name, instance)
        liveness.mark_fenced(instance)
        logger.warning(
            "worker %s stopped heartbeating with work in hand; ended %d of its sessions",
            name,
            ended,
        )
    abandoned = ledger.abandon_orphans(
        jobs, reason="its worker process stopped heartbeating", now=now
    )
    if abandoned:
        logger.warning("marked %d run(s) of dead worker processes abandoned", abandoned)
    if database_queue:
        live = set(live_instances().values_list("instance", flat=True))
        lost = lost_tasks(tasks, live)
        if lost:
            _fail_tasks(lost)
            logger.warning("%d task(s) of dead worker processes marked failed", len(lost))
        _requeue_stranded(job_names, tasks, set(lost))
    return outstanding.count()


def runs_out(jobs: list[Job]) -> bool:
    """Return whether runs of ``jobs`` are queued for workers or in progress there: what a
    new leader inherits, and watches from its first tick on."""
    names = [job.name for job in jobs if job.on_workers]
    return bool(names) and JobRun.objects.filter(JobRun.outstanding(), job__in=names).exists()


@dataclass(frozen=True)
class Watched:
    """What a look at the runs on workers found."""

    #: Runs were released (the caller sweeps at once: the tasks a gone worker held fail,
    #: and its transactional runs are queued again).
    released: bool
    #: Runs are queued for live workers, or claim-first runs in progress on workers (the
    #: caller looks again soon: a queued run may be taken, and its worker killed, at any
    #: moment).
    running: bool


def watch(jobs: list[Job]) -> Watched:
    """Look once for worker processes that are gone with runs of ``jobs`` in hand, and
    release those runs.

    A worker the server shows none of the sessions of (``liveness.gone_now``) is marked
    stopped, so it no longer counts as live, and its claim-first runs are abandoned at once
    (``ledger.VANISHED_REASON``). A claim-first run whose process is not live is abandoned too
    when that process is no node any more (its pool started another under its name) or is
    marked stopped: each group's leader watches only its own runs, and the first to find a
    worker gone marks it stopped, so the others no longer ask the server about it. Two reads,
    a third while a worker process is live, a fourth while one that is not has runs; nothing
    is written unless something is found.
    """
    job_names = [job.name for job in jobs]
    if not job_names:
        return Watched(released=False, running=False)
    out = set(
        JobRun.objects.filter(JobRun.outstanding(), job__in=job_names)
        .values_list("node_instance", "status")
        .distinct()
    )
    running = {instance for instance, status in out if status != JobRun.Status.QUEUED}
    queued = any(status == JobRun.Status.QUEUED for _, status in out)
    live = {
        instance: (name, last_heartbeat)
        for instance, name, last_heartbeat in Node.objects.filter(
            live_nodes_q(), role=Node.Role.WORKER
        ).values_list("instance", "name", "last_heartbeat")
    }
    gone = liveness.gone_now(live)
    for instance in gone:
        liveness.mark_fenced(instance)
    released = ledger.abandon_gone(jobs, gone)
    if gone:
        logger.warning(
            "worker process(es) %s gone (the database shows none of their sessions); "
            "released %d run(s) at once",
            ", ".join(sorted(live[instance][0] for instance in gone)),
            released,
        )
    others = running - set(live)
    rows = (
        {
            instance: stopped_at is not None
            for instance, stopped_at in Node.objects.filter(instance__in=others).values_list(
                "instance", "stopped_at"
            )
        }
        if others
        else {}
    )
    found = departed(others, rows)
    for why, instances in found.items():
        reason, words = RELEASES[why]
        count = ledger.abandon_gone(jobs, instances, reason=reason)
        if count:
            logger.warning("released %d run(s) of worker processes %s", count, words)
            released += count
    left = running - gone - found["replaced"] - found["stopped"]
    # Queued runs are watched only while a worker is live to take them: with none, a site
    # whose workers are down is not read twice a second until one starts.
    return Watched(released=bool(gone or released), running=bool(left) or (queued and bool(live)))


#: Why a watch releases the runs of a process that is not live (:func:`departed`): the
#: run's error, and the words of the log line.
RELEASES = {
    "replaced": (WORKER_REPLACED, "another took the place of"),
    "stopped": (WORKER_STOPPED, "marked stopped (found gone or fenced by another leader)"),
}


def _requeue_stranded(job_names: list[str], tasks: list[Task], lost: set) -> None:
    """Give each queued run that no live task will execute a new task (rows a worker has
    locked, inside a transactional run, are skipped: that run is in progress)."""
    with transaction.atomic():
        queued = list(
            JobRun.objects.select_for_update(skip_locked=True)
            .filter(job__in=job_names, status=JobRun.Status.QUEUED)
            .only("id", "attempt", "job", "slot")
        )
        stranded = set(stranded_runs([(r.pk, r.attempt) for r in queued], tasks, lost))
        runs = [run for run in queued if (run.pk, run.attempt) in stranded]
        if not runs:
            return
        enqueue(runs)
        wake_workers()
    logger.warning(
        "queued %d run(s) again whose task was lost: %s",
        len(runs),
        ", ".join(f"{run.job} slot {run.slot.isoformat()}" for run in runs[:5]),
    )
