"""A worker process's runs' outcomes, written many in one statement (a group commit).

``ledger.finish_many`` answers for each run what ``ledger.finish_with_state`` would, on every
vendor (grouping happens on PostgreSQL only); ``finishing.Finishes`` makes the threads that
finish while a write is under way wait for the next write and share it.
"""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection

from coordination import ledger
from coordination.clock import database_now
from coordination.models import JobRun, JobState
from coordination.registry import make_job
from coordination.schedules import every
from coordination.workers.finishing import Finishes
from tests.coordination.enginekit import GROUP, Recorder

pytestmark = pytest.mark.django_db(transaction=True)

ME = "i-me"


def _job(name):
    job = make_job(
        Recorder(), name=f"finishtest.{name}", group=GROUP, schedule=every(timedelta(minutes=1))
    )
    JobState.objects.get_or_create(name=job.name, defaults={"group": GROUP})
    return job


def _run(job, slot, *, instance=ME, status=JobRun.Status.RUNNING):
    return JobRun.objects.create(
        job=job.name, slot=slot, status=status, node="me", node_instance=instance
    )


def _outcome(slot, *, status=JobRun.Status.SUCCEEDED, next_due=None, error=""):
    return ledger.RunOutcome(
        slot=slot,
        status=status,
        duration=0.25,
        lateness=0.01,
        error=error,
        node="me",
        next_due=next_due,
    )


@pytest.mark.parametrize(
    ("outcome", "together"),
    [
        (dict(), True),
        (dict(status=JobRun.Status.FAILED, error="boom"), False),
        (dict(error="a warning"), False),
        (dict(retry_at=True), False),
        (dict(wake_before=True), False),
        (dict(manual_requested_at=True), False),
    ],
    ids=["plain-success", "failure", "error-text", "retry", "wake-up", "run-now"],
)
def test_only_plain_successes_are_written_together(outcome, together):
    now = database_now()
    fields = {k: (now if v is True else v) for k, v in outcome.items()}
    base = dict(slot=now, status=JobRun.Status.SUCCEEDED, duration=1.0, lateness=0.0)
    value = ledger.RunOutcome(**{**base, "error": "", "node": "n", "next_due": None, **fields})
    assert ledger.outcomes.finishes_together(value) is together


def test_many_outcomes_are_each_recorded_as_alone_and_a_taken_over_run_is_not():
    now = database_now().replace(microsecond=0)
    later = now + timedelta(minutes=1)
    a, b, c, d = (_job(name) for name in "abcd")
    finishes = [
        (_run(a, now), a, _outcome(now, next_due=later)),
        (_run(b, now), b, _outcome(now)),
        (_run(c, now, instance="i-other"), c, _outcome(now)),  # taken over meanwhile
        (_run(d, now), d, _outcome(now, status=JobRun.Status.FAILED, error="boom")),
        (_run(a, later), a, _outcome(later)),  # a second run of a: written alone
    ]
    JobState.objects.filter(name=a.name).update(next_due=now)
    JobState.objects.filter(name=b.name).update(next_due=now)

    assert ledger.finish_many(finishes, instance=ME) == [False, False, None, False, False]

    runs = {(run.job, run.slot): run for run in JobRun.objects.all()}
    assert runs[(a.name, now)].status == runs[(a.name, later)].status == JobRun.Status.SUCCEEDED
    assert runs[(b.name, now)].status == JobRun.Status.SUCCEEDED
    assert runs[(c.name, now)].status == JobRun.Status.RUNNING
    assert runs[(d.name, now)].status == JobRun.Status.FAILED
    assert runs[(d.name, now)].error == "boom"
    states = {state.name: state for state in JobState.objects.all()}
    assert states[a.name].last_slot == later and states[a.name].next_due == later
    assert states[b.name].next_due == now, "an outcome without a next slot leaves it"
    assert states[b.name].last_status == JobRun.Status.SUCCEEDED
    assert states[b.name].consecutive_failures == 0 and states[b.name].last_duration == 0.25
    assert states[c.name].last_status == "", "a run taken over writes nothing of its job"
    assert (states[d.name].last_status, states[d.name].consecutive_failures) == ("failed", 1)


def _wait_for(condition, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {timeout} s")
        time.sleep(0.005)


def test_outcomes_that_end_during_a_write_share_the_next_one(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("elsewhere each thread writes its own outcome on its own connection")
    now = database_now()
    jobs = [_job(f"g{n}") for n in range(6)]
    runs = [_run(job, now) for job in jobs]
    finishes = Finishes(instance=ME)
    writes: list[int] = []
    real = ledger.finish_many

    def finish_many(batch, *, instance):
        if not writes:
            # The first write waits until every other thread has come to wait behind it.
            _wait_for(lambda: len(finishes._waiting) == len(jobs) - 1, "the other threads")
        writes.append(len(batch))
        return real(batch, instance=instance)

    monkeypatch.setattr(ledger, "finish_many", finish_many)
    answers: dict[str, bool | None] = {}

    def finish(run, job):
        try:
            answers[job.name] = finishes.finish(run, job, _outcome(now))
        finally:
            connection.close()

    threads = [
        threading.Thread(target=finish, args=(run, job))
        for run, job in zip(runs, jobs, strict=True)
    ]
    threads[0].start()
    _wait_for(lambda: writes or finishes._writing, "the first write")
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert writes == [1, 5]
    assert answers == {job.name: False for job in jobs}
    assert set(JobRun.objects.values_list("status", flat=True)) == {JobRun.Status.SUCCEEDED}


def test_a_failed_write_is_raised_in_every_thread_it_carried(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("elsewhere each thread writes its own outcome on its own connection")
    now = database_now()
    job = _job("e")
    finishes = Finishes(instance=ME)

    def finish_many(batch, *, instance):
        raise ConnectionError("the database went away")

    monkeypatch.setattr(ledger, "finish_many", finish_many)
    with pytest.raises(ConnectionError, match="went away"):
        finishes.finish(_run(job, now), job, _outcome(now))
    assert not finishes._writing and not finishes._waiting
