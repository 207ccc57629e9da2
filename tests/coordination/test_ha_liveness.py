"""Liveness under real faults: real ``runscheduler`` processes, signals and session kills.

Each test reproduces a way unattended operation used to break: a job frozen by a crashed
run-now, a ``--once`` run fenced as a frozen leader, a follower deaf to SIGTERM in lease mode,
a job overlapping itself after its node lost only the lock.
"""

import signal
import time

import pytest
from django.db import connection

from coordination import services
from coordination.conf import settings
from coordination.locks import terminate_holder
from coordination.models import JobRun, JobState, Leadership
from coordination.registry import registry
from devtools.servers import free_port
from plugins.testing import make_due
from tests.support.databases import suite_server
from tests.support.lockwaits import waits_for_lock
from tests.support.polling import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]

SLOW = "hatest.slow"  # claim first, every 2 s, works HATEST_SLOW_SECONDS
CRASHY = "hatest.crashy"  # transactional, every 2 s, works HATEST_SLOW_SECONDS


def leader(group: str) -> str | None:
    row = Leadership.objects.filter(group=group).first()
    return row.node if row else None


def already_claimed(proc) -> int:
    return proc.log().count("already claimed elsewhere")


def assert_no_self_overlap(job_name: str) -> list[JobRun]:
    """No two runs of the job were going at the same time (from the ledger's times)."""
    runs = list(
        JobRun.objects.filter(job=job_name, started_at__isnull=False)
        .exclude(status=JobRun.Status.MISSED)
        .order_by("started_at")
    )
    for earlier, later in zip(runs, runs[1:], strict=False):
        assert earlier.finished_at is not None and earlier.finished_at <= later.started_at, (
            f"{later.slot} ({later.node}) started while {earlier.slot} ({earlier.node}) ran"
        )
    return runs


@pytest.mark.server
def test_a_run_now_killed_mid_run_neither_freezes_the_job_nor_spins_the_survivor(schedulers):
    procs = [schedulers(f"rn-{i}", "hatest_slow") for i in range(2)]
    wait_until(lambda: JobRun.objects.filter(job=SLOW, status="succeeded").exists(), timeout=20)
    assert services.request_run(SLOW, requested_by="editor")
    manual = wait_until(
        lambda: JobRun.objects.filter(job=SLOW, trigger="manual", status="running").first(),
        timeout=15,
    )
    victim = next(p for p in procs if p.name == manual.node)
    survivor = next(p for p in procs if p is not victim)
    victim.signal(signal.SIGKILL)
    # The survivor leads, the killed run is abandoned, and the schedule goes on.
    abandoned = wait_until(
        lambda: JobRun.objects.filter(pk=manual.pk, status="abandoned").first(), timeout=20
    )
    wait_until(
        lambda: JobRun.objects.filter(
            job=SLOW, node=survivor.name, status="succeeded", slot__gt=abandoned.finished_at
        ).exists(),
        timeout=15,
    )
    assert JobState.objects.get(name=SLOW).run_requested_at is None
    assert already_claimed(survivor) <= 1, "the survivor retried a taken slot in a loop"
    assert JobRun.objects.filter(job=SLOW).count() < 40, "no flood of ledger rows"


@pytest.mark.server
def test_a_long_once_run_is_not_fenced_as_a_frozen_leader(schedulers):
    """``--once`` heartbeats: a follower leaves its run alone, and it exits 0."""
    make_due(registry.get(SLOW))
    slow = {"HATEST_SLOW_SECONDS": "6"}  # twice the lease
    once = schedulers("once", "hatest_slow", env=slow, extra_args=["--once"])
    running = wait_until(
        lambda: JobRun.objects.filter(job=SLOW, node="once", status="running").first(),
        timeout=15,
    )
    follower = schedulers("follower", "hatest_slow", env=slow)
    assert once.wait(timeout=30) == 0, once.log()
    running.refresh_from_db()
    assert running.status == JobRun.Status.SUCCEEDED, running.error
    assert "took over from stale node once" not in follower.log()
    assert_no_self_overlap(SLOW)


@pytest.mark.server
def test_once_exits_non_zero_when_its_work_is_cut_off(schedulers):
    make_due(registry.get(CRASHY))
    once = schedulers(
        "once-cut", "hatest_crash", env={"HATEST_SLOW_SECONDS": "3"}, extra_args=["--once"]
    )
    once.wait_for_log("working on slot", timeout=15)
    assert terminate_holder(settings.group_key("hatest_crash")) is not None
    assert once.wait(timeout=30) != 0
    assert "cut off" in once.log() and "rolled back" in once.log()
    assert not JobRun.objects.filter(job=CRASHY, status="succeeded").exists()


@pytest.mark.postgresql
def test_a_follower_in_lease_mode_stops_promptly_on_sigterm(schedulers):
    lease_mode = {"INSTATIC_LOCK_MODE": "transaction", "INSTATIC_MAX_TICK": "0.5"}
    procs = [schedulers(f"lease-{i}", "hatest", env=lease_mode) for i in range(2)]
    name = wait_until(lambda: leader("hatest"), timeout=20)
    follower = next(p for p in procs if p.name != name)
    # By the time the leader has run twice, the follower is waiting for the lock.
    wait_until(lambda: JobRun.objects.filter(job="hatest.tick").count() >= 2, timeout=20)
    sent = time.time()
    follower.signal(signal.SIGTERM)
    assert follower.wait(timeout=30) == 0
    # From the signal to the node's last line, by its log: what the follower does to stop,
    # not how long the interpreter then takes to exit on a busy machine (1.5 s there).
    took = follower.logged_at(rf"node {follower.name} stopped") - sent
    assert took <= 1.5, f"a follower took {took:.1f}s to stop after SIGTERM"


@pytest.mark.server
def test_a_job_never_overlaps_itself_when_its_node_loses_only_the_lock(schedulers):
    procs = [schedulers(f"ov-{i}", "hatest_slow", env={"HATEST_SLOW_SECONDS": "4"}) for i in (0, 1)]
    running = wait_until(
        lambda: JobRun.objects.filter(job=SLOW, status="running").first(), timeout=20
    )
    old = running.node
    # The other node is waiting in the server for the lock, so it, not the old node, gets it.
    (other,) = [p.name for p in procs if p.name != old]
    wait_until(lambda: waits_for_lock(other, "hatest_slow"), timeout=30)
    assert terminate_holder(settings.group_key("hatest_slow")) is not None
    # A deadline, not a wait: the other node leads within a lock wait, but on a machine busy
    # with other suites starting its loop again has taken over 10 s.
    new = wait_until(lambda: (name := leader("hatest_slow")) != old and name, timeout=30)
    # The old node is alive and finishes its run; the new leader waits for it, then goes on.
    wait_until(
        lambda: JobRun.objects.filter(job=SLOW, node=new, status="succeeded").exists(),
        timeout=30,
    )
    running.refresh_from_db()
    assert running.status == JobRun.Status.SUCCEEDED, "the old node's run finished as its own"
    assert all(p.alive() for p in procs)
    assert_no_self_overlap(SLOW)
    connection.close()


@pytest.mark.server
def test_a_scheduler_started_while_the_database_is_down_waits_for_it_and_then_leads(schedulers):
    server = suite_server()
    if server is None:
        pytest.skip("the database server was not started by the test suite")
    connection.close()
    server.halt()
    try:
        proc = schedulers("late-riser", "hatest", env={"INSTATIC_STARTUP_DB_WAIT": "120"})
        proc.wait_for_log("Trying again in", timeout=20)
        assert proc.alive()
    finally:
        server.resume()
        connection.close()
    proc.wait_for_log("running groups", timeout=30)
    wait_until(
        lambda: JobRun.objects.filter(job="hatest.tick", node="late-riser", status="succeeded"),
        timeout=20,
    )
    assert proc.stop() == 0


def test_sigterm_while_waiting_for_the_database_exits_zero_at_once(schedulers):
    down = f"postgres://instatic@127.0.0.1:{free_port()}/instatic"
    proc = schedulers(
        "waiter", "hatest", env={"DATABASE_URL": down, "INSTATIC_STARTUP_DB_WAIT": "120"}
    )
    proc.wait_for_log("Trying again in", timeout=20)
    proc.signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert "stopped while waiting for the database" in proc.log()
