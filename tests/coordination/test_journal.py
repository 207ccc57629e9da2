"""A node's journal of its committed runs, checked against the ledger (coordination/journal.py).

The failover tests (test_failover.py) lose real commits with a real asynchronous standby;
these pin each case of the check on every vendor: nothing lost, a lost claim-first run
(written back), a lost transactional run (reported, runs again), a run pruned by retention,
a run retried by another node, and a slot that ran again elsewhere.
"""

from datetime import UTC, datetime, timedelta

import pytest

from coordination.journal import ClaimJournal, Entry, restore
from coordination.models import JobRun

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
JOB = "journal.job"


def slot(n: int) -> datetime:
    return T0 + timedelta(minutes=n)


def ledger_row(n: int, *, instance="me", trigger=JobRun.Trigger.SCHEDULE, job=JOB) -> JobRun:
    return JobRun.objects.create(
        job=job,
        slot=slot(n),
        status=JobRun.Status.SUCCEEDED,
        node="node",
        node_instance=instance,
        trigger=trigger,
    )


@pytest.fixture
def journal():
    return ClaimJournal(node="node-a", instance="me", log_prefix="test-scheduler")


def remember(journal, n: int, *, transactional=False, status=JobRun.Status.SUCCEEDED):
    journal.record(
        Entry(
            job=JOB,
            slot=slot(n),
            transactional=transactional,
            trigger=JobRun.Trigger.SCHEDULE,
            status=status,
        )
    )


def test_nothing_is_checked_until_the_database_is_in_doubt(journal, django_assert_num_queries):
    remember(journal, 1)
    assert not journal.needs_check
    journal.doubt()
    assert journal.needs_check
    ledger_row(1)
    with django_assert_num_queries(1):
        assert journal.check() == 0
    assert not journal.needs_check


def test_an_empty_journal_costs_nothing_even_in_doubt(journal, django_assert_num_queries):
    journal.doubt()
    assert not journal.needs_check
    with django_assert_num_queries(0):
        assert journal.check() == 0


def test_a_lost_claim_first_run_is_written_back_with_its_outcome(journal, caplog):
    ledger_row(0)
    remember(journal, 1, status=JobRun.Status.FAILED)
    journal.doubt()
    assert journal.check() == 1
    row = JobRun.objects.get(job=JOB, slot=slot(1))
    assert (row.status, row.node, row.node_instance) == (JobRun.Status.FAILED, "node-a", "me")
    assert "written back by node-a" in row.error
    assert row.finished_at is not None
    assert "ledger went backwards: job journal.job slot" in caplog.text
    assert "written back so that it does not run again" in caplog.text


def test_a_lost_run_still_in_progress_is_written_back_as_running(journal):
    ledger_row(0)
    journal.record(Entry(job=JOB, slot=slot(1), transactional=False, trigger="schedule"))
    journal.doubt()
    journal.check()
    row = JobRun.objects.get(job=JOB, slot=slot(1))
    assert (row.status, row.finished_at) == (JobRun.Status.RUNNING, None)
    # Its worker's outcome then lands on the written-back row as on any other.
    journal.finished(JOB, slot(1), JobRun.Status.SUCCEEDED)
    assert journal._entries[JOB][-1].status == JobRun.Status.SUCCEEDED


def test_a_lost_transactional_run_is_reported_and_left_to_run_again(journal, caplog):
    ledger_row(0)
    remember(journal, 1, transactional=True)
    journal.doubt()
    assert journal.check() == 1
    assert not JobRun.objects.filter(job=JOB, slot=slot(1)).exists()
    assert "The job is transactional, so its effects were lost with it" in caplog.text


def test_a_slot_claimed_by_another_node_before_the_write_back_is_a_possible_double_run(
    journal, caplog
):
    """The check saw the run missing; another node claimed the slot before the write-back."""
    entry = Entry(job=JOB, slot=slot(1), transactional=False, trigger="schedule")
    ledger_row(1, instance="other")
    assert restore(entry, node="node-a", instance="me") is False
    journal._report_lost(entry)
    assert "Another node claimed the slot meanwhile: it may have run twice" in caplog.text
    assert JobRun.objects.get(job=JOB, slot=slot(1)).node_instance == "other"


def test_a_slot_that_ran_again_elsewhere_is_logged_as_run_twice(journal, caplog):
    ledger_row(1, instance="other")
    remember(journal, 1)
    journal.doubt()
    assert journal.check() == 0
    assert "job journal.job slot 2026-12-01T12:01:00+00:00 ran twice" in caplog.text


def test_a_run_retried_by_another_node_is_not_a_double_run(journal, caplog):
    ledger_row(1, instance="other", trigger=JobRun.Trigger.RETRY)
    remember(journal, 1, status=JobRun.Status.FAILED)
    journal.doubt()
    assert journal.check() == 0
    assert "ran twice" not in caplog.text


def test_a_queued_run_a_worker_took_is_not_a_double_run(journal, caplog):
    ledger_row(1, instance="worker-instance")
    journal.record(
        Entry(
            job=JOB,
            slot=slot(1),
            transactional=False,
            trigger=JobRun.Trigger.SCHEDULE,
            status=JobRun.Status.ABANDONED,
            queued=True,
        )
    )
    journal.doubt()
    assert journal.check() == 0
    assert "ran twice" not in caplog.text


def test_a_transactional_slot_run_again_elsewhere_is_not_a_double_run(journal, caplog):
    ledger_row(1, instance="other")
    remember(journal, 1, transactional=True)
    journal.doubt()
    journal.check()
    assert "ran twice" not in caplog.text


def test_runs_removed_by_retention_are_not_lost(journal, caplog):
    remember(journal, 1)
    remember(journal, 2)
    ledger_row(3)  # retention kept only the newest row of the job
    journal.doubt()
    assert journal.check() == 0
    assert "went backwards" not in caplog.text
    assert not JobRun.objects.filter(job=JOB, slot__lt=slot(3)).exists()


def test_the_journal_keeps_only_the_newest_runs_of_each_job(journal):
    from coordination.journal import KEEP

    for n in range(KEEP + 5):
        remember(journal, n)
    assert [e.slot for e in journal._entries[JOB]] == [slot(n) for n in range(5, KEEP + 5)]
