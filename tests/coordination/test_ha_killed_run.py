"""A killed leader's claim-first runs: abandoned at once when the server shows its process gone.

A SIGKILLed node's heartbeat stays fresh for up to a lease, so its runs would hold their jobs
for that long. The server closes every session of a killed process at once; when it shows
none of them, the new leader abandons the runs at once and the jobs go on (with their retry
policy). The jobs are in ``tests/coordination/killedrunapp``: they run until their node stops.
"""

import signal

import pytest

from coordination import services
from coordination.clock import database_now
from coordination.ledger import VANISHED_REASON
from coordination.models import JobRun, JobState, Node
from tests.conftest import FAST
from tests.support.polling import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True), pytest.mark.server]

GROUP = "hatest_killed"
EVERY = "killed.every2s"  # every 2 s, no retry: its next slot is due behind the killed run
RETRIED = "killed.retried"  # run on request, retry_abandoned=True
ENV = {"INSTATIC_TEST_EXTRA_APPS": "tests.coordination.killedrunapp"}
#: The target: the jobs' next runs start within this long after the kill (database clock).
BOUND = 1.0


def running(job: str) -> JobRun | None:
    return JobRun.objects.filter(job=job, status="running").first()


def test_a_killed_leaders_claim_first_runs_are_abandoned_at_once_and_their_jobs_go_on(
    schedulers,
):
    procs = [schedulers(f"kr-{i}", GROUP, env=ENV) for i in range(3)]
    wait_until(lambda: JobState.objects.filter(name=RETRIED).exists(), timeout=30)
    every_run = wait_until(lambda: running(EVERY), timeout=30)
    assert services.request_run(RETRIED, requested_by="editor")
    retried_run = wait_until(lambda: running(RETRIED), timeout=30)
    # Both runs in flight on the leader, and the 2 s job's next slot already due behind it.
    wait_until(lambda: JobState.objects.get(name=EVERY).next_due <= database_now(), timeout=10)
    # The node that runs them, as their rows say (the leader that claimed them): the current
    # leader may be another by now on a busy machine.
    victim = next(p for p in procs if p.name == every_run.node)
    assert retried_run.node == victim.name

    killed_at = database_now()
    victim.signal(signal.SIGKILL)
    # Deadlines for the waits; the bounds are checked on the database's own times.
    wait_until(
        lambda: JobRun.objects.filter(pk=every_run.pk, finished_at__isnull=False).exists(),
        timeout=30,
    )
    every_run.refresh_from_db()
    assert every_run.status == JobRun.Status.ABANDONED and every_run.error == VANISHED_REASON
    next_run = wait_until(
        lambda: (
            JobRun.objects.filter(job=EVERY, slot__gt=every_run.slot)
            .exclude(started_at=None)
            .exclude(node=victim.name)
            .order_by("started_at")
            .first()
        ),
        timeout=30,
    )
    # The retry takes the abandoned row again; its error stays until the attempt ends.
    retry = wait_until(
        lambda: (
            JobRun.objects.filter(pk=retried_run.pk, trigger="retry")
            .exclude(node=victim.name)
            .first()
        ),
        timeout=30,
    )
    assert retry.error == VANISHED_REASON
    resumed = (next_run.started_at - killed_at).total_seconds()
    retried = (retry.started_at - killed_at).total_seconds()
    print(f"next slot started {resumed:.2f}s after the kill, the retry {retried:.2f}s")
    assert resumed <= BOUND, f"{EVERY}'s next run started {resumed:.2f}s after the kill"
    assert retried <= BOUND, f"{RETRIED}'s retry started {retried:.2f}s after the kill"
    assert retry.attempt == 2


def test_a_killed_leaders_run_its_late_successor_cannot_prove_gone_ends_with_its_lease(
    schedulers,
):
    """The followers were held up (frozen here; starved on a busy machine) past half a lease
    after the kill, so the absence of the killed node's sessions proves nothing by then (a
    partition ends sessions that late too): its run waits for its lease. It is abandoned as
    that lease runs out, not a fixed while after the late successor took over."""
    lease = float(FAST["INSTATIC_LEASE"])
    procs = [schedulers(f"krl-{i}", GROUP, env=ENV) for i in range(3)]
    every_run = wait_until(lambda: running(EVERY), timeout=30)
    victim = next(p for p in procs if p.name == every_run.node)
    followers = [p for p in procs if p is not victim]
    for follower in followers:
        follower.signal(signal.SIGSTOP)
    victim.signal(signal.SIGKILL)
    wait_until(
        lambda: (
            (database_now() - Node.objects.get(name=victim.name).last_heartbeat).total_seconds()
            >= 0.6 * lease
        ),
        timeout=30,
    )
    for follower in followers:
        follower.signal(signal.SIGCONT)

    wait_until(
        lambda: JobRun.objects.filter(pk=every_run.pk, finished_at__isnull=False).exists(),
        timeout=30,
    )
    every_run.refresh_from_db()
    last_beat = Node.objects.get(name=victim.name).last_heartbeat
    held = (every_run.finished_at - last_beat).total_seconds()
    print(f"abandoned {held:.2f}s after the killed node's last heartbeat (lease {lease:g}s)")
    assert every_run.status == JobRun.Status.ABANDONED
    assert every_run.error != VANISHED_REASON, "proven gone at once: the scenario did not happen"
    assert held <= 1.5 * lease, f"abandoned {held:.2f}s after its last heartbeat"
