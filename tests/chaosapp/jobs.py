"""Jobs at several cadences for the chaos soak: each writes an ``Effect`` per slot.

Most are plugin jobs (the ``plugins`` group); ``lease_tick`` has a group of its own for the
soak's lease-mode replicas, and ``publish_probe`` runs in the ``publishing`` group beside the
publish jobs. ``worker_tick`` and ``worker_claim`` run on worker processes (``run_on="workers"``):
the plugins leader queues their slots and a worker process of any replica, or of the soak's
worker-only node, executes them. ``chaosevents.record`` is a transactional subscriber of the
``published`` events, on worker processes too: one ``Effect`` per event (``event:<id>``).
``chaoschain.worker_chain`` runs when due, on worker processes, alone in a group of its own.

Whether a slot fails or hangs is decided from the slot itself, so a rerun of the same slot
behaves the same and the soak stays reproducible.
"""

import hashlib
import threading
from datetime import timedelta

from coordination.clock import database_now
from coordination.models import JobRun
from coordination.registry import job
from coordination.schedules import WhenDue
from plugins.sdk import Missed, every, on_post_event, plugin_job
from tests.jobsapp.models import Effect

# The group of the lease-mode replicas (devtools.chaos starts them with --group chaoslease).
LEASE_GROUP = "chaoslease"
# The group of the when-due job on workers, with no other job in it.
CHAIN_GROUP = "chaoschain"
# How long after its run the chain job is next due (devtools/chaos/config.py CHAIN_ANSWER).
CHAIN_ANSWER = timedelta(seconds=1)


def _chance(slot, salt: str) -> float:
    digest = hashlib.sha256(f"{salt}:{slot.isoformat()}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32


def _effect(ctx) -> None:
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)


@plugin_job(schedule=every(timedelta(seconds=1)), transactional=True)
def tx_tick(ctx):
    """Every second, in one transaction with its ledger row."""
    _effect(ctx)


@plugin_job(schedule=every(timedelta(seconds=2)), missed=Missed.LATEST)
def claim_tick(ctx):
    """Every 2 s, claim first (its row is committed before it runs)."""
    _effect(ctx)
    threading.Event().wait(0.3)


@plugin_job(schedule=every(timedelta(seconds=3)), transactional=True)
def flaky(ctx):
    """Every 3 s; about a third of slots raise (and roll back their effect)."""
    _effect(ctx)
    if _chance(ctx.slot, "flaky") < 0.33:
        raise RuntimeError(f"flaky slot {ctx.slot.isoformat()}")


@plugin_job(schedule=every(timedelta(seconds=5)), max_duration=timedelta(seconds=2))
def hang(ctx):
    """Every 5 s; a fifth of slots hang past their max duration until asked to stop."""
    _effect(ctx)
    if _chance(ctx.slot, "hang") < 0.2:
        waited = 0.0
        while not ctx.should_stop() and waited < 8:
            threading.Event().wait(0.1)
            waited += 0.1
        threading.Event().wait(1.0)


@plugin_job(schedule=every(timedelta(seconds=4)))
def slow_claim(ctx):
    """Every 4 s, claim first, then about 3 s of non-database work.

    It gives the soak a run that is reliably in progress, so faults can land mid-run (the lock
    session ended, PostgreSQL restarted) and the soak can see how the run's row ends up. It does
    not poll ``should_stop()``: plenty of real jobs do not either.
    """
    _effect(ctx)
    threading.Event().wait(3.0)


@plugin_job(schedule=every(timedelta(seconds=1)), transactional=True)
def catchup(ctx):
    """Every second; the soak moves its next slot back 30 minutes to force a long catch-up.

    A dedicated job, so the 1,800 caught-up slots land before its first ledger row instead of
    on top of slots another fault already accounts for.
    """
    _effect(ctx)


@plugin_job(schedule=every(timedelta(seconds=1)), transactional=True, run_on="workers")
def worker_tick(ctx):
    """Every second on a worker process, in one transaction with its ledger row."""
    _effect(ctx)


@plugin_job(schedule=every(timedelta(seconds=2)), run_on="workers", retry_abandoned=True)
def worker_claim(ctx):
    """Every 2 s on a worker process, claim first, then about a second of work; a run whose
    worker died is retried (``retry_abandoned``).

    Its effect names the attempt the ledger gave this start (``node#attempt``): a retried slot
    has one effect per attempt, and no attempt may start twice. The second of work gives the
    worker faults a run in progress to land on.
    """
    attempt = JobRun.objects.get(job=ctx.job.name, slot=ctx.slot).attempt
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=f"{ctx.node}#{attempt}")
    threading.Event().wait(1.0)


@job(
    name="chaosapp.lease_tick",
    group=LEASE_GROUP,
    schedule=every(timedelta(seconds=1)),
    transactional=True,
)
def lease_tick(ctx):
    """Every second in its own group, run only by the soak's lease-mode replicas.

    Lease mode (``INSTATIC_LOCK_MODE=transaction``) must never share a group with session-lock
    replicas, so this group has its own replicas and no session replica runs it.
    """
    _effect(ctx)


@job(
    name="chaosapp.publish_probe",
    group="publishing",
    schedule=every(timedelta(seconds=10)),
    transactional=True,
)
def publish_probe(ctx):
    """Every 10 s in the publishing group: a periodic run beside the publish jobs.

    A run that ends as planned does not make the leader plan again, so a wake-up lost while
    it runs (a ``NOTIFY`` another query on the lock session read) leaves the leader asleep
    until this job's next slot. The soak schedules a lone post at these slots and checks that
    it still goes live on time.
    """
    _effect(ctx)


@job(
    name="chaoschain.worker_chain",
    group=CHAIN_GROUP,
    schedule=WhenDue(fallback=timedelta(seconds=30)),
    run_on="workers",
)
def worker_chain(ctx):
    """When due, on a worker process, claim first: each run answers that the job is next due
    a second later, which its leader did not plan when it queued the run.

    Nothing else in its group wakes that leader, which sleeps up to 30 s where it listens for
    ``NOTIFY``: the answer reaches it only through the wake-up the worker sends after the
    run's outcome, or, for a run lost with its worker, through the run's abandonment. A lost
    one leaves a gap the soak sees. A run that fails (its worker's sessions ended) answers
    nothing: the job waits for its 30 s fallback. Half a second of work gives the worker
    faults a run in hand.
    """
    _effect(ctx)
    threading.Event().wait(0.5)
    return database_now() + CHAIN_ANSWER


@on_post_event(
    "published",
    transactional=True,
    plugin="chaosevents",
    name="record",
    retry_backoff=1,
    run_on="workers",
)
def record_event(event, ctx):
    """One ``Effect`` per published event, in the delivery's transaction: exactly once. On the
    worker processes, so deliveries are queued, taken, killed and fenced with them."""
    Effect.objects.create(job=f"event:{event.id}", slot=event.at, node=ctx.node)
