"""A leader that could not prove a node with runs out dead looks again as its lease runs out.

The instant is decided by :func:`maintenance.recheck_instant` (a table); its effect is checked
against the real database with a node whose heartbeat is too old for the absence of its
sessions to prove a death (``liveness.sessions.vanish_verdict``).
"""

import time
from datetime import UTC, datetime, timedelta

import pytest

from coordination.clock import database_now
from coordination.conf import settings
from coordination.maintenance import LEASE_END_MARGIN, Maintenance, recheck_instant
from coordination.models import JobRun, JobState, Node
from tests.coordination.enginekit import GROUP, Recorder, declare, make_due

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


M = LEASE_END_MARGIN


@pytest.mark.parametrize(
    ("current", "lease_end", "due"),
    [
        (None, None, None),  # nothing out: nothing to look at
        (150.0, None, 150.0),
        (None, NOW + timedelta(seconds=2), 102.0 + M),
        (101.0, NOW + timedelta(seconds=2), 101.0),  # already due sooner
        (200.0, NOW + timedelta(seconds=2), 102.0 + M),  # sooner than the takeover's recheck
        (None, NOW - timedelta(seconds=1), 100.0 + M),  # already past: at once
    ],
    ids=["none", "kept", "lease-end", "sooner-kept", "sooner-than-kept", "past"],
)
def test_maintenance_is_due_again_just_after_the_first_lease_end(current, lease_end, due):
    assert recheck_instant(current, lease_end, NOW, monotonic=100.0) == pytest.approx(due)


@pytest.mark.django_db(transaction=True)
def test_a_leader_that_cannot_prove_a_node_dead_looks_again_as_its_lease_runs_out():
    lease = float(settings.LEASE)
    reg, job = declare(Recorder())
    make_due(job, ago=timedelta(0))
    beat = database_now() - timedelta(seconds=0.6 * lease)  # too old to prove anything
    Node.objects.create(
        name="starved", instance="starved0", host="h", pid=1, started_at=beat, last_heartbeat=beat
    )
    run = JobRun.objects.create(
        job=job.name,
        slot=beat,
        status=JobRun.Status.RUNNING,
        node="starved",
        node_instance="starved0",
        started_at=beat,
    )
    maintenance = Maintenance(group=GROUP, instance="leader0")

    maintenance.run(
        database_now(),
        {job.name: job},
        {state.name: state for state in JobState.objects.all()},
        log_prefix="test",
        paused=lambda job, exc: None,
    )
    after = time.monotonic()

    run.refresh_from_db()
    assert run.status == JobRun.Status.RUNNING  # not proven gone, its lease not passed
    assert maintenance.maintenance_at is not None
    assert maintenance.maintenance_at <= after + 0.4 * lease + LEASE_END_MARGIN
