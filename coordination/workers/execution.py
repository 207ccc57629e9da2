"""Executing one delivery of a queued run's task on a worker process.

The queue may deliver a task more than once (a retried task, a backend that delivers at
least once, a task swept back into the queue); the ledger decides: the run starts only by
moving its row from ``queued`` to ``running`` for the same attempt (``ledger.take_queued``),
so any other delivery finds it taken and does nothing.
"""

import logging
from dataclasses import dataclass

from django.db import transaction

from coordination import ledger
from coordination.models import JobRun, JobState
from coordination.planner import RunPlan
from coordination.reasons import paused_reason
from coordination.registry import JobRegistry, registry
from coordination.runner import Worker
from coordination.workers.host import WorkerHost

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    """What became of one delivery of a run's task (the task's return value says it)."""

    outcome: str
    run_id: int

    #: The run was executed here (its outcome is in the ledger).
    RAN = "ran"
    #: The run was not queued (any more) for this attempt: another delivery took it.
    TAKEN = "taken"
    #: The job was paused while its run waited in the queue: the slot is recorded missed.
    SKIPPED = "skipped"
    #: The job is not declared in this process (a deploy in progress): left queued.
    UNKNOWN = "unknown job"


def skip_reason(run: JobRun, state) -> str | None:
    """Return why a queued run must not start now (its job paused meanwhile), or ``None``.

    A run-now request runs a paused job, as on the leader; a retry of a paused job waits
    for it to be resumed there too, so a queued retry of a job paused since is skipped.
    """
    if state is None or not state.paused or run.trigger == JobRun.Trigger.MANUAL:
        return None
    return paused_reason(state)


def execute(
    run_id: int, attempt: int, *, host: WorkerHost, registry: JobRegistry = registry
) -> Delivery:
    """Execute attempt ``attempt`` of the queued run ``run_id`` if it is still queued.

    The caller heartbeats for the process meanwhile (``WorkerProcess.busy``): a running row
    whose worker's heartbeat is stale is abandoned by the leader.
    """
    run = JobRun.objects.filter(pk=run_id, attempt=attempt, status=JobRun.Status.QUEUED).first()
    if run is None:
        return Delivery(Delivery.TAKEN, run_id)
    job = registry.get(run.job)
    if job is None:
        logger.warning(
            "[%s] run %s of job %s left queued: this process does not declare the job",
            host.log_prefix,
            run_id,
            run.job,
        )
        return Delivery(Delivery.UNKNOWN, run_id)
    state = JobState.objects.filter(name=job.name).first()
    reason = skip_reason(run, state)
    if reason is not None:
        with transaction.atomic():
            skipped = ledger.skip_queued(run, reason=reason)
        if skipped:
            logger.info(
                "[%s] job %s slot %s not started: the job was paused while it was queued",
                host.log_prefix,
                job.name,
                run.slot.isoformat(),
            )
        return Delivery(Delivery.SKIPPED if skipped else Delivery.TAKEN, run_id)
    plan = RunPlan(
        job=job,
        slot=run.slot,
        trigger=run.trigger,
        requested_by=run.requested_by,
        queued_run=run,
    )
    if not job.transactional:
        taken = ledger.take_queued(
            run.pk, run.attempt, node=host.node.name, instance=host.node.instance
        )
        if taken is None:
            return Delivery(Delivery.TAKEN, run_id)
        plan.claimed_run = taken
    worker = Worker(host, plan)
    worker.mark_started()
    worker.run()
    taken_elsewhere = job.transactional and worker.current_run is None
    return Delivery(Delivery.TAKEN if taken_elsewhere else Delivery.RAN, run_id)
