"""Runs whose node died: marked abandoned, so their jobs go on (and their retry policy
applies); and run-history retention.

A when-due job whose run is abandoned is made due at once: the run never answered when its
job is next due, and its work (a batch half sent, deliveries it had claimed) is for the next
run to take up, not for the job's fallback a minute later.
"""

from collections.abc import Collection
from datetime import datetime

from django.db.models import Q
from django.db.models.functions import Now

from coordination import liveness
from coordination.models import JobRun, JobState, Node
from coordination.registry import Job
from coordination.selectors import live_instances, live_nodes_q
from coordination.workers.task_rows import delete_tasks_of_runs


def delete_runs(run_ids: list[int]) -> int:
    """Delete the ledger rows ``run_ids`` (run-history retention), and the task rows of the
    runs that went to workers; return how many runs."""
    deleted = JobRun.objects.filter(pk__in=run_ids).delete()[0]
    delete_tasks_of_runs(run_ids)
    return deleted


def _due_again(jobs: Collection[Job], abandoned_jobs: set[str]) -> None:
    """Make the when-due ones of ``abandoned_jobs`` due now (never later than they were)."""
    names = [job.name for job in jobs if job.name in abandoned_jobs and not job.schedule.periodic]
    if names:
        JobState.objects.filter(name__in=names).filter(
            Q(wake_at__isnull=True) | Q(wake_at__gt=Now())
        ).update(wake_at=Now())


def _abandon(jobs: Collection[Job], runs, error: str) -> int:
    """Mark the in-progress runs of the ``runs`` queryset abandoned with ``error``, and make
    their when-due jobs due at once.

    The rows are found by a plain read and then updated by primary key: an ``UPDATE`` that
    searched the ``(status, ...)`` index itself would, on MariaDB, wait on the index entries
    an open transaction of a frozen process changed (a transactional run on a worker moving
    its row to running), and hold up the leader until that process was fenced, which only
    this leader does.
    """
    found = dict(runs.values_list("pk", "job"))
    if not found:
        return 0
    abandoned = JobRun.objects.filter(JobRun.in_progress(), pk__in=list(found)).update(
        status=JobRun.Status.ABANDONED, finished_at=Now(), error=error
    )
    if abandoned:
        _due_again(jobs, set(found.values()))
    return abandoned


def abandon_orphans(jobs: Collection[Job], *, reason: str = "", now: datetime | None = None) -> int:
    """Mark running rows of ``jobs`` whose nodes are no longer alive (at ``now``, the
    database's time; by default the statement's) as abandoned."""
    job_names = [job.name for job in jobs]
    if not job_names:
        return 0
    return _abandon(
        jobs,
        JobRun.objects.filter(JobRun.in_progress(), job__in=job_names).exclude(
            node_instance__in=live_instances(now)
        ),
        reason or "its node stopped heartbeating during the run",
    )


#: Why a run of a node that still looked alive was abandoned at once.
VANISHED_REASON = (
    "its node's process is gone (the database shows none of its sessions); abandoned at once"
)


def abandon_vanished(jobs: Collection[Job], *, instance: str) -> int:
    """Mark in-progress runs abandoned whose node is gone though its lease has not run out.

    A SIGKILLed node's heartbeat stays fresh for up to a lease, and until then its runs would
    hold their jobs. When the database server shows none of the sessions that node process
    opened, the run cannot be alive (``liveness.vanished_instances`` says when that proves
    it); its runs are abandoned now, and the job's retry policy applies as for any abandoned
    run. One read when no live node has a run going, which is the usual case.
    """
    job_names = [job.name for job in jobs]
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
    return abandon_gone(jobs, liveness.vanished_instances(candidates))


def abandon_gone(jobs: Collection[Job], instances: Collection[str], *, reason: str = "") -> int:
    """Mark the in-progress runs of ``jobs`` by the node processes ``instances`` abandoned,
    processes known to be gone (by default: the server shows none of their sessions)."""
    if not instances or not jobs:
        return 0
    return _abandon(
        jobs,
        JobRun.objects.filter(
            JobRun.in_progress(),
            job__in=[job.name for job in jobs],
            node_instance__in=list(instances),
        ),
        reason or VANISHED_REASON,
    )


def abandon_own(instance: str, jobs: Collection[Job], *, reason: str) -> int:
    """Mark this node's unfinished runs of ``jobs`` abandoned (shutdown past the grace)."""
    return _abandon(
        jobs,
        JobRun.objects.filter(
            JobRun.in_progress(), job__in=[job.name for job in jobs], node_instance=instance
        ),
        reason,
    )
