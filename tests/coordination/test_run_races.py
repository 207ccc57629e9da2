"""A worker's answers when another node, a refusal or the clock gets to its run first.

The races are forced, not waited for: the ``runs_starting`` signal is sent by the leader just
before it claims its runs, so a receiver can do there, on the real database, what another node
would do in that instant (claim the slot, take the retry). A run that outlives its
``max_duration``, a run another node took over while it ran, and a run whose previous attempt
still holds the job's state row on another connection are real too.
"""

import logging
import threading
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection, transaction

from coordination import ledger
from coordination.clock import database_now
from coordination.keys import normalize_key
from coordination.locks import terminate_holder
from coordination.locks.sqlite import database_path, lock_file_path
from coordination.loop import runs_starting
from coordination.models import JobRun, JobState
from tests.coordination.enginekit import GROUP, Recorder, declare, make_due, ran, tick
from tests.jobsapp.models import Effect
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

MODES = pytest.mark.parametrize(
    "transactional", [False, True], ids=["claim-first", "transactional"]
)


@contextmanager
def when_runs_start(receiver):
    """Connect ``receiver`` to ``runs_starting`` for the ``with`` block only."""
    runs_starting.connect(receiver, dispatch_uid="test_run_races")
    try:
        yield
    finally:
        runs_starting.disconnect(dispatch_uid="test_run_races")


def runner_log(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "coordination.runner"]


# --- a refusal -------------------------------------------------------------------------------
@MODES
def test_a_refused_run_is_claimed_and_recorded_failed_with_the_refusal(transactional):
    """A disabled plugin's job: its slot is dealt with (failed, with why), its code never runs."""
    recorder = Recorder()
    reg, job = declare(recorder, transactional=transactional)
    slot = make_due(job, ago=timedelta(0))
    asked = []

    def refuse(sender, group, jobs, **kwargs):
        asked.append([j.name for j in jobs])
        return {job.name: PermissionError("the plugin 'example' is disabled")}

    with when_runs_start(refuse):
        tick(reg)

    assert asked == [[job.name]]
    assert recorder.slots == []
    run = ran(job)
    assert (run.slot, run.status) == (slot, "failed")
    assert "PermissionError: the plugin 'example' is disabled" in run.error
    assert JobState.objects.get(name=job.name).consecutive_failures == 1


# --- another node got there first ------------------------------------------------------------
def test_a_slot_another_node_claimed_first_is_skipped_and_the_job_moves_on(caplog):
    """A transactional run claims its slot inside its own transaction; a taken slot is skipped,
    and the job's next slot moves on so no tick plans the taken one again."""
    recorder = Recorder()
    reg, job = declare(recorder, transactional=True)
    slot = make_due(job, ago=timedelta(0))

    def other_node_claims(sender, group, jobs, **kwargs):
        ledger.claim(job, slot, trigger="schedule", node="other-node", instance="other")
        return {}

    with (
        caplog.at_level(logging.INFO, logger="coordination.runner"),
        when_runs_start(other_node_claims),
    ):
        tick(reg)

    assert recorder.slots == []
    assert list(JobRun.objects.filter(job=job.name).values_list("slot", "node")) == [
        (slot, "other-node")
    ]
    assert JobState.objects.get(name=job.name).next_due == job.schedule.next_after(slot)
    assert any("already claimed elsewhere; skipping" in m for m in runner_log(caplog))


class FailsFirst:
    def __init__(self):
        self.calls = 0

    def __call__(self, ctx):
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("flaky upstream")


@MODES
def test_a_retry_another_node_took_first_is_left_to_it(transactional):
    flaky = FailsFirst()
    reg, job = declare(flaky, retries=1, retry_backoff=0.05, transactional=transactional)
    make_due(job, ago=timedelta(0))
    tick(reg)
    failed = ran(job)
    assert (failed.status, failed.attempt) == ("failed", 1)
    wait_until(lambda: database_now() > failed.retry_at, timeout=5)
    taken = []

    def other_node_retries(sender, group, jobs, **kwargs):
        run = JobRun.objects.get(pk=failed.pk)
        taken.append(ledger.claim_retry(run, node="other-node", instance="other"))
        return {}

    with when_runs_start(other_node_retries):
        tick(reg)

    assert taken == [True]
    assert flaky.calls == 1, "this node did not run the attempt the other node took"
    run = JobRun.objects.get(pk=failed.pk)
    assert (run.node, run.status, run.attempt) == ("other-node", "running", 2)


# --- the clock and the lease -----------------------------------------------------------------
def test_a_transactional_run_past_its_max_duration_is_rolled_back_as_timed_out():
    """Its effects go with the rollback; the ledger says ``timed_out`` and why."""

    def overruns(ctx):
        Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
        wait_until(ctx.should_stop, timeout=10, interval=0.01)

    reg, job = declare(overruns, transactional=True, max_duration=timedelta(seconds=0.2))
    slot = make_due(job, ago=timedelta(0))
    tick(reg)
    run = ran(job)
    assert (run.slot, run.status) == (slot, "timed_out")
    assert "ran past its max_duration of 0:00:00.200000" in run.error
    assert not Effect.objects.filter(job=job.name).exists()


def test_a_run_taken_over_while_it_ran_keeps_the_takers_outcome(caplog):
    """A claim-first run marked abandoned by another node (it took this node for dead) must
    not overwrite that when it finishes after all: the outcome is dropped and the node cut off."""

    def taken_over_meanwhile(ctx):
        JobRun.objects.filter(job=ctx.job.name, slot=ctx.slot).update(status="abandoned")

    reg, job = declare(taken_over_meanwhile)
    slot = make_due(job, ago=timedelta(0))
    with caplog.at_level(logging.WARNING, logger="coordination.runner"):
        scheduler = tick(reg)
    run = JobRun.objects.get(job=job.name)
    assert (run.slot, run.status, run.finished_at) == (slot, "abandoned", None)
    assert any(
        "finished but its run was taken over; outcome not recorded" in m for m in runner_log(caplog)
    )
    assert scheduler.cut_offs == [f"{job.name} slot {slot.isoformat()} taken over"]


# --- a previous run still in flight elsewhere ---------------------------------------------------
@contextmanager
def state_row_locked(name: str):
    """Hold the job's state row locked on another connection, as an ex-leader's run does."""
    locked, release = threading.Event(), threading.Event()
    failure = []

    def hold():
        try:
            with transaction.atomic():
                list(JobState.objects.select_for_update().filter(name=name).values_list("pk"))
                locked.set()
                release.wait(30)
        except Exception as exc:  # noqa: BLE001 - shown by the assertion below
            failure.append(exc)
            locked.set()
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10) and not failure, failure
        yield
    finally:
        release.set()
        holder.join(30)


@pytest.mark.server
def test_a_transactional_run_waits_while_its_previous_run_holds_the_state_row(caplog):
    """No overlap with a run an ex-leader still has in flight: the slot waits, then runs."""
    recorder = Recorder()
    reg, job = declare(recorder, transactional=True)
    slot = make_due(job, ago=timedelta(0))

    with (
        caplog.at_level(logging.INFO, logger="coordination.runner"),
        state_row_locked(job.name),
    ):
        tick(reg)
        assert recorder.slots == []
        assert not JobRun.objects.filter(job=job.name).exists()

    assert any(
        f"slot {slot.isoformat()} waits: its previous run still holds it on another node" in m
        for m in runner_log(caplog)
    )
    tick(reg)
    assert recorder.slots == [slot]
    assert ran(job).status == "succeeded"


# --- the lock lost mid-run ---------------------------------------------------------------------
def lose_the_groups_lock() -> None:
    """End this group's leader lock the way the vendor loses it.

    PostgreSQL and MariaDB: the lock's session is terminated (a follower fencing this node, an
    operator). SQLite: the lock file is replaced, so another process could lock a new one.
    """
    key = f"group:{GROUP}"
    if connection.vendor == "sqlite":
        path = lock_file_path(database_path("default"), normalize_key(key))
        path.unlink()
        return
    assert terminate_holder(key) is not None


def test_a_transactional_run_that_lost_the_lock_rolls_back_for_the_new_leader(caplog):
    def loses_its_lock(ctx):
        Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
        lose_the_groups_lock()

    reg, job = declare(loses_its_lock, transactional=True)
    slot = make_due(job, ago=timedelta(0))
    with caplog.at_level(logging.WARNING, logger="coordination.runner"):
        scheduler = tick(reg)

    assert not JobRun.objects.filter(job=job.name).exists(), "the new leader runs the slot"
    assert not Effect.objects.filter(job=job.name).exists()
    assert JobState.objects.get(name=job.name).next_due == slot
    assert scheduler.cut_offs == [f"{job.name} slot {slot.isoformat()} rolled back"]
    assert any(
        "rolled back: lock lost mid-run; the new leader runs it" in m for m in runner_log(caplog)
    )


def test_a_transactional_failure_after_the_lock_was_lost_is_left_to_the_new_leader(caplog):
    """Not recorded as failed (which would count against the job and might pause it)."""

    def loses_its_lock_then_fails(ctx):
        lose_the_groups_lock()
        raise RuntimeError("upstream failed too")

    reg, job = declare(loses_its_lock_then_fails, transactional=True)
    slot = make_due(job, ago=timedelta(0))
    with caplog.at_level(logging.WARNING, logger="coordination.runner"):
        scheduler = tick(reg)

    assert not JobRun.objects.filter(job=job.name).exists()
    state = JobState.objects.get(name=job.name)
    assert (state.next_due, state.consecutive_failures) == (slot, 0)
    assert scheduler.cut_offs == [f"{job.name} slot {slot.isoformat()} failed"]
    assert any(
        "failed after the lock was lost; leaving it to the new leader" in m
        for m in runner_log(caplog)
    )
