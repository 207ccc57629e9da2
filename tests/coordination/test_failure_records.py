"""A rolled-back run's failure is recorded only where the slot is still this run's."""

from datetime import timedelta

import pytest

from coordination import ledger
from coordination.clock import database_now
from coordination.models import JobRun
from tests.coordination.enginekit import Recorder, declare


def outcome(slot) -> ledger.RunOutcome:
    return ledger.RunOutcome(
        slot=slot,
        status=JobRun.Status.FAILED,
        duration=0.1,
        lateness=0.0,
        error="boom",
        node="old-leader",
        next_due=None,
    )


@pytest.mark.django_db
def test_a_first_attempts_failure_is_recorded_on_a_new_row():
    _, job = declare(Recorder())
    slot = database_now()
    assert ledger.record_failed(job, outcome(slot), trigger="schedule", instance="me")
    assert JobRun.objects.get(job=job.name).status == JobRun.Status.FAILED


@pytest.mark.django_db
def test_a_failure_for_a_slot_another_node_ran_meanwhile_leaves_that_run_alone():
    _, job = declare(Recorder())
    slot = database_now() - timedelta(minutes=1)
    JobRun.objects.create(job=job.name, slot=slot, status="succeeded", node="new-leader")

    assert not ledger.record_failed(job, outcome(slot), trigger="schedule", instance="me")

    run = JobRun.objects.get(job=job.name)
    assert (run.status, run.node) == (JobRun.Status.SUCCEEDED, "new-leader")
