"""Helpers for testing plugin jobs with pytest-django (see ``docs/plugins.md``).

Two ways to test a job:

- call the function with a context from :func:`context_for` (fast; any ``db`` fixture), or
- drive a real scheduler tick of the ``plugins`` group with :func:`run_tick`, which claims the
  slot in the run ledger, applies the policies and records the outcome exactly as in
  production. Ticks run jobs in worker threads with their own database connections, so such
  tests need ``@pytest.mark.django_db(transaction=True)``.

Neither touches the global job registry: :func:`run_tick` runs only the jobs it is given.

Subscribers to publish events (``@on_post_event``) are tested with :func:`deliver_events`:
it dispatches the events written so far to the subscribers given and delivers them in this
thread, with the delivery ledger's rules (order per post, retries, transactional or claim
first), so any ``db`` fixture will do.
"""

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from coordination.clock import database_now
from coordination.models import JobState
from coordination.registry import Job, JobContext, JobRegistry
from coordination.scheduler import Scheduler
from plugins.models import PLUGIN_GROUP


def job_of(job_or_func: Job | Callable) -> Job:
    """Return the :class:`Job` of a function decorated with ``@plugin_job`` (or a Job)."""
    if isinstance(job_or_func, Job):
        return job_or_func
    job = getattr(job_or_func, "job", None)
    if not isinstance(job, Job):
        raise TypeError(f"{job_or_func!r} is not a Job nor a function decorated with @plugin_job")
    return job


def context_for(
    job_or_func: Job | Callable,
    *,
    slot: datetime | None = None,
    node: str = "test-node",
    deadline: datetime | None = None,
    trigger: str = "schedule",
    should_stop: Callable[[], bool] = lambda: False,
) -> JobContext:
    """Return the context a job gets when it runs (``slot`` defaults to the database's now)."""
    job = job_of(job_or_func)
    return JobContext(
        job=job,
        slot=slot or database_now(),
        node=node,
        logger=logging.getLogger(f"instatic.jobs.{job.name}"),
        deadline=deadline,
        trigger=trigger,
        _stop=should_stop,
    )


def make_due(job_or_func: Job | Callable, *, ago: timedelta = timedelta(0), **state) -> JobState:
    """Make the job's latest slot at or before ``now - ago`` due (creating its state).

    With ``ago`` longer than the interval, the slots in between count as missed, as after
    downtime. A job run when due (a subscriber to publish events) is made due at
    ``now - ago``. Extra keyword arguments are set on the job's state (e.g. ``paused=True``).
    """
    job = job_of(job_or_func)
    then = database_now() - ago
    slots = job.schedule.slots_between(then - timedelta(days=40), then, limit=1)
    if not job.schedule.periodic:
        slots = [then]
    if not slots:
        raise ValueError(f"{job.name} has no slot in the 40 days before {then.isoformat()}")
    state, _ = JobState.objects.update_or_create(
        name=job.name,
        defaults={
            "group": job.group,
            "schedule": job.schedule.describe(),
            "fingerprint": job.fingerprint,
            "next_due": slots[-1],
            **state,
        },
    )
    return state


def run_tick(*jobs: Job | Callable, node: str = "test-node") -> Scheduler:
    """Run one tick of the ``plugins`` group with only ``jobs`` declared; wait for the runs.

    The first tick of a job only creates its state at its next slot; use :func:`make_due`
    first to make it run. A job declared ``run_on="workers"`` is queued by the tick and then
    run here by a worker (:func:`run_queued`), as a worker process would. Returns the
    finished :class:`Scheduler`.
    """
    registry = JobRegistry()
    for job in jobs:
        registry.register(job_of(job))
    scheduler = Scheduler(groups=[PLUGIN_GROUP], node_name=node, once=True, registry=registry)
    scheduler.run()
    if any(job.on_workers for job in registry.all()):
        run_queued(*registry.all(), node=node)
    return scheduler


def run_queued(*jobs: Job | Callable, node: str = "test-node") -> int:
    """Run every queued run of ``jobs`` in this process, as worker ``<node>/worker-1`` does
    (moving each from queued to running, recording its outcome); return how many tasks ran."""
    from coordination.workers.process import WorkerProcess

    registry = JobRegistry()
    for job in jobs:
        registry.register(job_of(job))
    worker = WorkerProcess(f"{node}/worker-1", stop=threading.Event(), registry=registry)
    ran = 0
    try:
        while worker.work():
            ran += 1
    finally:
        worker.close()
    return ran


def deliver_events(*subscribers: Job | Callable, node: str = "test-node") -> int:
    """Dispatch undispatched publish events to ``subscribers`` and deliver every one due now.

    Events written before are dispatched to these subscribers only (as if no other were
    declared). Each subscriber's open deliveries are delivered as its job would, batch after
    batch until none is due now (a failed one waits for its back-off: call again after
    moving its ``due_at``, or check its ``Delivery`` row). Returns how many succeeded.
    """
    from django.db import transaction

    from outbox import delivering, dispatch
    from outbox.models import Delivery

    jobs = [job_of(subscriber) for subscriber in subscribers]
    with transaction.atomic():
        dispatch.dispatch(dispatch.targets(jobs), now=database_now(), limit=1_000_000)
    before = Delivery.objects.filter(status=Delivery.Status.SUCCEEDED).count()
    for job in jobs:
        for _ in range(10_000):  # a bound, should a subscriber never run out of due work
            with transaction.atomic():
                again = delivering.deliver_pending(job.func, context_for(job, node=node))
            if again is None or again > database_now():
                break
    return Delivery.objects.filter(status=Delivery.Status.SUCCEEDED).count() - before
