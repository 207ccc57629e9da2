"""Retries with backoff: a failed run of a slot is tried again, as attempts of the same slot.

``retries`` and ``retry_backoff`` are per job. Attempts are one ledger row (``attempt`` counts
them, ``retry_at`` says when the next one is due), so a slot still succeeds at most once; a
retry waits for its time, and for a paused job to be resumed.
"""

from datetime import UTC, datetime, timedelta

import pytest

from coordination import services
from coordination.clock import database_now
from coordination.models import JobRun
from coordination.registry import MAX_RETRY_DELAY, JobDeclarationError, make_job
from coordination.scheduler import Scheduler
from coordination.schedules import every
from plugins.sdk import make_plugin_job
from tests.coordination.enginekit import GROUP, declare, make_due, tick
from tests.support.polling import wait_until

NOW = datetime(2026, 12, 1, tzinfo=UTC)


class FailsFirst:
    """A job that fails its first ``times`` calls, then succeeds."""

    def __init__(self, times: int):
        self.times = times
        self.calls = 0

    def __call__(self, ctx):
        self.calls += 1
        if self.calls <= self.times:
            raise RuntimeError(f"flaky upstream (call {self.calls})")


def noop(ctx):
    pass


# --- declarations and backoff ----------------------------------------------------------------
def test_the_backoff_doubles_per_attempt_up_to_an_hour_and_stops_after_the_retries():
    job = make_job(noop, name="t.job", schedule=every(timedelta(hours=1)), retries=3,
                   retry_backoff=10)  # fmt: skip
    assert [job.retry_at(n, NOW) - NOW for n in (1, 2, 3)] == [
        timedelta(seconds=10),
        timedelta(seconds=20),
        timedelta(seconds=40),
    ]
    assert job.retry_at(4, NOW) is None
    patient = make_job(noop, name="t.patient", schedule=every(timedelta(hours=1)), retries=20)
    assert patient.retry_at(20, NOW) - NOW == MAX_RETRY_DELAY
    assert (
        make_job(noop, name="t.once", schedule=every(timedelta(hours=1))).retry_at(1, NOW) is None
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retries": -1}, "retries=-1 must be a whole number"),
        ({"retries": 1.5}, "retries=1.5 must be a whole number"),
        ({"retries": 1, "retry_backoff": 0}, "retry_backoff must be a positive"),
    ],
)
def test_bad_retry_options_are_one_clear_declaration_error(options, message):
    with pytest.raises(JobDeclarationError, match=message):
        make_job(noop, name="t.bad", schedule=every(timedelta(hours=1)), **options)


def test_plugin_jobs_declare_retries_too():
    job = make_plugin_job(noop, plugin="example", schedule=every(timedelta(hours=1)), retries=2,
                          retry_backoff=timedelta(minutes=1))  # fmt: skip
    assert (job.retries, job.retry_backoff) == (2, timedelta(minutes=1))


# --- the engine ---------------------------------------------------------------------------
def only_run(job) -> JobRun:
    return JobRun.objects.get(job=job.name)


def retried_until(reg, job, done):
    """Tick (a new leader each time, as after a takeover) until ``done(run)``; return the run."""
    return wait_until(lambda: tick(reg) and done(only_run(job)) and only_run(job), timeout=15)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
def test_a_failed_slot_is_retried_after_its_backoff_and_succeeds_as_one_ledger_row(transactional):
    flaky = FailsFirst(2)
    reg, job = declare(flaky, retries=2, retry_backoff=0.05, transactional=transactional)
    make_due(job, ago=timedelta(0))
    tick(reg)
    first = only_run(job)
    assert (first.status, first.attempt) == ("failed", 1)
    assert first.retry_at is not None and first.retry_at > first.started_at
    assert "flaky upstream (call 1)" in first.error
    run = retried_until(reg, job, lambda r: r.status == "succeeded")
    assert (run.attempt, run.trigger, run.retry_at, run.slot) == (3, "retry", None, first.slot)
    assert flaky.calls == 3
    assert JobRun.objects.filter(job=job.name).count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
def test_when_the_retries_are_used_up_the_slot_stays_failed(transactional):
    flaky = FailsFirst(10)
    reg, job = declare(flaky, retries=1, retry_backoff=0.05, transactional=transactional)
    make_due(job, ago=timedelta(0))
    tick(reg)
    run = retried_until(reg, job, lambda r: r.attempt == 2 and r.status == "failed")
    assert run.retry_at is None and "call 2" in run.error
    for _ in range(3):
        tick(reg)
    assert flaky.calls == 2


@pytest.mark.django_db(transaction=True)
def test_a_paused_jobs_retry_waits_until_it_is_resumed():
    flaky = FailsFirst(1)
    reg, job = declare(flaky, retries=1, retry_backoff=0.01)
    make_due(job, ago=timedelta(0))
    tick(reg)
    services.set_paused(job.name, True, reason="investigating")
    retry_at = only_run(job).retry_at
    wait_until(lambda: database_now() > retry_at, timeout=5)
    tick(reg)
    assert flaky.calls == 1 and only_run(job).status == "failed"
    services.set_paused(job.name, False)
    tick(reg)
    assert flaky.calls == 2 and only_run(job).status == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_a_running_leader_wakes_for_the_retry_and_runs_it_without_a_takeover():
    flaky = FailsFirst(1)
    reg, job = declare(flaky, retries=1, retry_backoff=0.2)
    make_due(job, ago=timedelta(0))
    scheduler = Scheduler(groups=[GROUP], node_name="retry-node", registry=reg)
    scheduler.start()
    try:
        run = wait_until(
            lambda: (r := JobRun.objects.filter(job=job.name, status="succeeded").first()) and r,
            timeout=15,
        )
    finally:
        scheduler.stop()
        scheduler.wait()
        scheduler.finish()
    assert (run.attempt, run.node) == (2, "retry-node")
