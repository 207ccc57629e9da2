"""Recording the runs a worker pool ended past their hard limit (``limits.py`` decides when).

The pool has killed the process; here its overdue runs are recorded failed with the reason in
words (the job's retry policy applies, as for any failure), their task rows failed with the
same words, and the process's node marked stopped, so the leader's next sweep abandons
whatever else the process had in hand instead of waiting for its lease.
"""

import logging

from django.db import connection

from coordination import ledger, liveness
from coordination.clock import database_now
from coordination.dberrors import DATABASE_ERRORS
from coordination.models import JobRun
from coordination.registry import JobRegistry, registry
from coordination.workers.limits import Limit

logger = logging.getLogger(__name__)


def record_overrun(limit: Limit, *, node_name: str, registry: JobRegistry = registry) -> bool:
    """Record one run ended with its process as failed; return False if it was not this
    process's any more (or its job is not declared here)."""
    run = JobRun.objects.filter(pk=limit.run_id, attempt=limit.attempt).first()
    job = registry.get(run.job) if run is not None else None
    if job is None:
        return False
    now = database_now()
    duration = (now - run.started_at).total_seconds() if run.started_at else None
    outcome = ledger.RunOutcome(
        slot=run.slot,
        status=JobRun.Status.FAILED,
        duration=duration,
        lateness=None,
        error=limit.words,
        node=node_name,
        next_due=None,
        retry_at=job.retry_at(run.attempt, now),
    )
    if not ledger.fail_overrun(run, job, outcome, instance=limit.instance):
        return False
    _fail_task(limit)
    logger.error(
        "job %s slot %s on worker %s %s%s",
        job.name,
        run.slot.isoformat(),
        node_name,
        limit.words,
        f"; trying again at {outcome.retry_at.isoformat()}" if outcome.retry_at else "",
    )
    return True


def _fail_task(limit: Limit) -> None:
    from django_tasks_db.models import DBTaskResult

    from coordination.workers.claiming import fail_tasks

    ids = DBTaskResult.objects.filter(
        status="RUNNING", args_kwargs__args=[limit.run_id, limit.attempt]
    ).values_list("id", flat=True)
    fail_tasks([(task_id, "", limit.words) for task_id in ids])


def record_overruns(limits: list[Limit], *, node_name: str) -> None:
    """Record ``limits``' runs (all of one killed process) and mark that process stopped;
    a database error is logged (the sweep abandons the runs after the lease instead)."""
    try:
        for limit in limits:
            record_overrun(limit, node_name=node_name)
        for instance in {limit.instance for limit in limits}:
            liveness.mark_fenced(instance)
    except DATABASE_ERRORS as exc:
        logger.warning(
            "could not record the runs ended with worker %s (%s); the leader's sweep abandons "
            "them after the lease",
            node_name,
            exc,
        )
    finally:
        connection.close()
