"""Runs whose node died: marked abandoned, so their jobs go on (and their retry policy
applies); and run-history retention.
"""

from django.db.models.functions import Now

from coordination import liveness
from coordination.models import JobRun, Node
from coordination.selectors import live_instances, live_nodes_q


def delete_runs(run_ids: list[int]) -> int:
    """Delete the ledger rows ``run_ids`` (run-history retention); return how many."""
    return JobRun.objects.filter(pk__in=run_ids).delete()[0]


def _abandon(runs, error: str) -> int:
    """Mark the in-progress runs of the ``runs`` queryset abandoned with ``error``.

    The rows are found by a plain read and then updated by primary key: an ``UPDATE`` that
    searched the ``(status, ...)`` index itself would, on MariaDB, wait on the index entries
    an open transaction of a frozen process changed (a transactional run on a worker moving
    its row to running), and hold up the leader until that process was fenced, which only
    this leader does.
    """
    ids = list(runs.values_list("pk", flat=True))
    if not ids:
        return 0
    return JobRun.objects.filter(JobRun.in_progress(), pk__in=ids).update(
        status=JobRun.Status.ABANDONED, finished_at=Now(), error=error
    )


def abandon_orphans(job_names: list[str], *, reason: str = "") -> int:
    """Mark running rows of nodes that are no longer alive as abandoned."""
    if not job_names:
        return 0
    return _abandon(
        JobRun.objects.filter(JobRun.in_progress(), job__in=job_names).exclude(
            node_instance__in=live_instances()
        ),
        reason or "its node stopped heartbeating during the run",
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
    return _abandon(
        JobRun.objects.filter(JobRun.in_progress(), job__in=job_names, node_instance__in=gone),
        VANISHED_REASON,
    )


def abandon_own(instance: str, job_names: list[str], *, reason: str) -> int:
    """Mark this node's unfinished runs of ``job_names`` abandoned (shutdown past the grace)."""
    return JobRun.objects.filter(
        JobRun.in_progress(), job__in=job_names, node_instance=instance
    ).update(status=JobRun.Status.ABANDONED, finished_at=Now(), error=reason)
