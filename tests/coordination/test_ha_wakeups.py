"""Wake-ups reach a sleeping leader at once, on every server vendor.

A leader sleeps until its next due instant, or ``INSTATIC_NOTIFY_MAX_TICK`` (30 s) when
nothing is due. PostgreSQL wakes it with ``NOTIFY``; MySQL/MariaDB has none, so
``notify_group`` bumps the group's wake-up counter after commit and the leader's own heartbeat,
which reads the counters in the statement that writes it, wakes the loop.
"""

from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now

from coordination import services
from coordination.models import JobRun, JobState, Leadership, LeadershipTerm, WakeUp
from tests.support.polling import wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

MANUAL = "hatest.manual"  # it runs only when asked to
GROUP = "hatest_cli"


@pytest.mark.mysql
def test_the_wake_up_counter_moves_when_the_transaction_commits():
    with transaction.atomic():
        services.notify_group(GROUP)
        assert not WakeUp.objects.filter(group=GROUP).exists(), "nothing before commit"
    assert WakeUp.objects.get(group=GROUP).seq == 1
    services.notify_group(GROUP)  # outside a transaction: at once
    assert WakeUp.objects.get(group=GROUP).seq == 2


@pytest.mark.server
@pytest.mark.multiprocess
def test_a_sleeping_leader_serves_a_run_now_without_waiting_for_its_next_tick(schedulers):
    procs = [schedulers(f"wake-{i}", GROUP) for i in (0, 1)]
    wait_until(lambda: JobState.objects.filter(name=MANUAL).exists(), timeout=20)
    # Past the takeover's own re-check (lease + 2 heartbeats), the leader sleeps for
    # INSTATIC_NOTIFY_MAX_TICK (30 s): only a wake-up can make it run the job sooner.
    wait_until(
        lambda: Leadership.objects.filter(
            group=GROUP, since__lt=Now() - timedelta(seconds=6)
        ).exists(),
        timeout=20,
    )
    assert services.request_run(MANUAL, requested_by="editor")
    run = wait_until(
        lambda: JobRun.objects.filter(job=MANUAL, trigger="manual", status="succeeded").first(),
        timeout=10,
        message="the run-now request waited for the leader's next tick",
    )
    # Run by the node that led when it started, as the leadership history says (the current
    # leader may be another by now on a busy machine).
    assert LeadershipTerm.objects.filter(
        Q(ended_at__isnull=True) | Q(ended_at__gte=run.started_at),
        group=GROUP,
        node=run.node,
        started_at__lte=run.started_at,
    ).exists(), f"{run.node} did not lead {GROUP} when it ran {MANUAL}"
    assert all(p.alive() for p in procs)
