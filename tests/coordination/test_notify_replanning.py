"""A ``NOTIFY`` always makes the leader plan again, however it reached the leader.

A leader that hears wake-ups skips the full tick when all that woke it is runs finishing as
planned (``GroupLoop.needs_tick``, which asks ``planner.needs_full_tick``). A ``NOTIFY`` sets
the same waker as a finished run when a job thread's ``still_held()`` reads it from the lock
session, or when it ends the sleep just as a run finishes; taken for a finished run it would
be lost, and a post an editor scheduled sooner would wait for the next tick
(``INSTATIC_NOTIFY_MAX_TICK``, 30 s by default). Real PostgreSQL lock session, real loop; the
test drives the loop's public steps itself, so what reads the notification is certain.
"""

import select
from datetime import timedelta

import pytest
from django.db import connection, transaction

from coordination import services
from coordination.clock import database_now
from coordination.registry import JobRegistry, make_job
from coordination.scheduler import Scheduler
from tests.coordination.enginekit import centered_every, make_due

pytestmark = pytest.mark.django_db(transaction=True)

GROUP = "notifytest"


def noop(ctx):
    pass


@pytest.fixture
def leader(listening_leader):
    """A loop that leads GROUP, has ticked, and would sleep (its job is due in an hour)."""
    registry = JobRegistry()
    job = registry.register(
        make_job(
            noop, name=f"{GROUP}.job", group=GROUP, schedule=centered_every(timedelta(hours=1))
        )
    )
    make_due(job, ago=timedelta(hours=-1), group=GROUP)
    scheduler = Scheduler(groups=[GROUP], node_name="notify-node", registry=registry)
    scheduler.register()
    [loop] = scheduler.loops
    try:
        assert loop.supervision.try_lead(wait=0)
        assert loop.step() > 5, "nothing due: the leader would sleep"
        yield loop, job
    finally:
        loop.lock.close()
        connection.close()


def notified_on_the_lock_session(loop, job) -> None:
    """An editor's change wakes the job; wait until its NOTIFY is on the lock's socket."""
    with transaction.atomic():
        services.request_wakeup(job.name, database_now())
        services.notify_group(GROUP)  # the job is not in the global registry
    readable, _, _ = select.select([loop.lock._conn.fileno()], [], [], 10)
    assert readable, "the NOTIFY never reached the lock session"


def test_a_notify_read_by_a_job_threads_lock_check_makes_the_leader_tick(leader):
    loop, job = leader
    loop.lock.wait_for_wakeup(0, loop.waker)  # the sleep hands the lock its waker
    notified_on_the_lock_session(loop, job)
    assert loop.lock.still_held()  # a transactional run's check before its commit
    assert loop.waker.is_set(), "the check passed the NOTIFY on to the leader"
    assert loop.needs_tick(), "a NOTIFY needs a full tick"


def test_a_notify_that_ends_the_sleep_as_a_run_finishes_makes_the_leader_tick(leader):
    loop, job = leader
    notified_on_the_lock_session(loop, job)
    loop.lock.wait_for_wakeup(30, loop.waker)  # ends on the NOTIFY
    loop.run_finished(job.name, as_planned=True)  # a run of another job ends meanwhile
    assert loop.needs_tick(), "a NOTIFY needs a full tick"


def test_a_notify_after_the_check_is_not_cleared_by_the_pass_without_a_tick(leader):
    loop, job = leader
    loop.run_finished(job.name, as_planned=True)
    assert not loop.needs_tick()
    loop.waker.notify()  # a NOTIFY read just after the check
    assert loop.between_ticks() == 0, "the loop ticks at once instead of sleeping"
    assert loop.needs_tick()
    loop.step()
    assert not loop.waker.notified, "the tick took it"
