"""Multi-process scheduler tests: three real ``runscheduler`` processes and real faults.

The ``hatest`` group runs ``hatest.tick`` every second, transactionally, writing an ``Effect``
row (no unique constraint) in the run's transaction: a slot run twice would show as two
effects. Timing uses a short lease so freezes resolve in seconds; it is passed through the
environment exactly as an operator would set it.
"""

import glob
import signal
import time
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.db.models import Value

from coordination.clock import database_now
from coordination.ledger import VANISHED_REASON
from coordination.locks import terminate_holder
from coordination.models import JobRun, Leadership, Node
from tests.jobsapp.models import Effect
from tests.support.databases import other_sessions, suite_server
from tests.support.polling import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]

JOB = "hatest.tick"
GROUP = "hatest"


@pytest.fixture
def replicas(schedulers):
    count_started = []

    def start(count: int = 3, *, env: dict | None = None, prefix=(), names=None):
        procs = []
        for i in range(count):
            name = names[i] if names else f"ha-{len(count_started)}"
            count_started.append(name)
            procs.append(schedulers(name, GROUP, env=env, prefix=prefix))
        return procs

    start.extra = lambda node, group: schedulers(node, group)
    return start


def succeeded_runs():
    return list(JobRun.objects.filter(job=JOB, status=JobRun.Status.SUCCEEDED).order_by("slot"))


def wait_for_runs(count: int, *, timeout: float = 30.0, **filters):
    return wait_until(
        lambda: (
            JobRun.objects.filter(job=JOB, status=JobRun.Status.SUCCEEDED, **filters).count()
            >= count
        ),
        timeout=timeout,
        message=f"fewer than {count} successful runs of {JOB} within {timeout}s",
    )


def leader_name() -> str | None:
    row = Leadership.objects.filter(group=GROUP).first()
    return row.node if row else None


def by_name(procs, name):
    return next(p for p in procs if p.name == name)


def slots_and_effects() -> tuple[list[datetime], Counter]:
    """Return the succeeded runs' slots and each slot's count of effects, read in one statement:
    one snapshot of both, since the replicas go on committing runs (each with its effect) while
    the test reads. Two reads let a run committed between them show its effect and not its
    run."""
    runs = (
        JobRun.objects.filter(job=JOB, status=JobRun.Status.SUCCEEDED)
        .annotate(kind=Value("run"))
        .order_by()
        .values_list("slot", "kind")
    )
    effects = (
        Effect.objects.filter(job=JOB)
        .annotate(kind=Value("effect"))
        .order_by()
        .values_list("slot", "kind")
    )
    slots, effect_slots = [], Counter()
    for slot, kind in runs.union(effects, all=True):
        if kind == "run":
            slots.append(slot)
        else:
            effect_slots[slot] += 1
    return sorted(slots), effect_slots


def assert_exactly_once(*, no_gaps: bool = False):
    """No (job, slot) ran twice, every run wrote exactly one effect, and (optionally) no gap."""
    slots, effects = slots_and_effects()
    assert len(slots) == len(set(slots))
    doubled = {slot: n for slot, n in effects.items() if n > 1}
    assert not doubled, f"slots with more than one effect: {doubled}"
    assert set(effects) == set(slots), "every effect belongs to exactly one successful run"
    if no_gaps:
        # Every second between the first and last run is in the ledger: run, or missed with a
        # reason (a run that overran its second on a loaded machine makes the next one
        # "overlap"). Nothing is silently lost.
        ledger = JobRun.objects.filter(job=JOB, slot__gte=slots[0], slot__lte=slots[-1])
        recorded = list(ledger.order_by("slot").values_list("slot", "status", "reason"))
        steps = {b[0] - a[0] for a, b in zip(recorded, recorded[1:], strict=False)}
        assert steps <= {timedelta(seconds=1)}, f"slots missing from the ledger: {sorted(steps)}"
        unexplained = [r for r in recorded if r[1] == "missed" and not r[2]]
        assert not unexplained, f"missed slots without a reason: {unexplained}"
    seen = set(slots)
    return [run for run in succeeded_runs() if run.slot in seen]


def test_three_replicas_run_every_slot_exactly_once(replicas):
    procs = replicas(3)
    wait_for_runs(1)
    first = succeeded_runs()[0].slot
    wait_until(
        lambda: JobRun.objects.filter(
            job=JOB, status="succeeded", slot__gte=first + timedelta(seconds=10)
        ).exists(),
        timeout=30,
    )
    # Exactly one process led; the other two followed the whole time.
    leaders = [p.name for p in procs if "acquired advisory lock" in p.log()]
    assert leaders == [leader_name()]
    runs = assert_exactly_once(no_gaps=True)
    assert runs[-1].slot - runs[0].slot >= timedelta(seconds=10)
    assert {run.node for run in runs} == set(leaders)
    for proc in procs:
        assert proc.stop() == 0
    assert_exactly_once()


@pytest.mark.server
def test_sigkill_of_the_leader_hands_over_within_two_seconds(replicas):
    procs = replicas(3)
    wait_for_runs(2)
    leader = by_name(procs, leader_name())
    leader.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    new_leader = wait_until(lambda: (name := leader_name()) != leader.name and name, timeout=5)
    takeover = time.monotonic() - killed_at
    assert takeover <= 2.0, f"takeover took {takeover:.2f}s"
    wait_for_runs(2, node=new_leader)
    assert_exactly_once()


@pytest.mark.server
def test_frozen_leader_is_removed_and_rejoins_as_follower(replicas):
    procs = replicas(3)
    wait_for_runs(2)
    leader = by_name(procs, leader_name())
    leader.signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    new_leader = wait_until(lambda: (name := leader_name()) != leader.name and name, timeout=10)
    takeover = time.monotonic() - frozen_at
    assert takeover <= 3 + 2, f"takeover after a freeze took {takeover:.2f}s (lease 3s)"
    wait_for_runs(2, node=new_leader)
    # A follower fenced it (not necessarily the one that got the lock next: both wait for it).
    fenced = "took over from stale node " + leader.name
    assert any(fenced in p.log() for p in procs if p is not leader)
    leader.signal(signal.SIGCONT)
    leader.wait_for_log(r"no longer leader", timeout=10)
    ran_before = JobRun.objects.filter(job=JOB, node=leader.name).count()
    wait_for_runs(3, node=new_leader, timeout=10)
    assert leader.alive()
    assert (
        JobRun.objects.filter(job=JOB, node=leader.name, status="succeeded").count() <= ran_before
    )
    assert_exactly_once()


@pytest.mark.server
def test_terminating_the_leaders_lock_session_mid_job_runs_no_slot_twice(replicas):
    procs = replicas(3, env={"HATEST_WORK_SECONDS": "0.6"})
    wait_for_runs(2)
    leader = leader_name()
    for _ in range(3):
        current = leader_name()
        # Hit the lock while a run is in flight (runs take 0.6s of every second).
        wait_until(
            lambda current=current: (
                JobRun.objects.filter(job=JOB).count() > 0
                and "job hatest.tick" in by_name(procs, current).log()
            ),
            timeout=5,
        )
        assert terminate_holder(f"group:{GROUP}") is not None
        # A node that stops leading deletes its row: wait for the next leader's.
        wait_until(
            lambda current=current: (name := leader_name()) is not None and name != current,
            timeout=5,
        )
    wait_for_runs(JobRun.objects.filter(job=JOB, status="succeeded").count() + 2)
    assert leader is not None
    assert all(p.alive() for p in procs)
    assert_exactly_once()


@pytest.mark.server
def test_database_restart_is_survived_and_work_resumes(replicas):
    """PostgreSQL: ``pg_ctl restart -m fast``; MariaDB: ``mysqladmin shutdown`` and a start."""
    server = suite_server()
    if server is None:
        pytest.skip("the database server was not started by the test suite")
    procs = replicas(3)
    names = [p.name for p in procs]
    wait_for_runs(2)
    # Every replica is up before the restart (one still starting would have nothing to survive).
    wait_until(
        lambda: Node.objects.filter(name__in=names).count() == len(procs),
        timeout=30,
        message="a replica did not start",
    )
    connection.close()
    server.restart()
    connection.close()
    restarted = database_now()
    before = JobRun.objects.filter(job=JOB, status="succeeded").count()
    # How fast is measured by the chaos soak (its pgrestart fault); here: that it resumes.
    wait_for_runs(before + 1, timeout=30)
    assert all(p.alive() for p in procs)
    # Each node on its own backoff (up to INSTATIC_DB_RETRY_MAX) heartbeats again: a follower
    # whose lock session was ended need not log that the database was down (its reconnect may
    # come after the restart), but it is back when its heartbeat is newer than the restart.
    wait_until(
        lambda: (
            Node.objects.filter(name__in=names, last_heartbeat__gt=restarted).count() == len(procs)
        ),
        timeout=30,
        message="a replica did not heartbeat after the restart",
    )
    assert_exactly_once()


@pytest.mark.server
def test_sigterm_exits_zero_and_hands_over_at_once(replicas):
    procs = replicas(3)
    wait_for_runs(2)
    leader = by_name(procs, leader_name())
    leader.signal(signal.SIGTERM)
    stopped_at = time.monotonic()
    new_leader = wait_until(lambda: (name := leader_name()) != leader.name and name, timeout=5)
    takeover = time.monotonic() - stopped_at
    assert leader.wait(timeout=25) == 0
    assert takeover <= 1.0, f"takeover after SIGTERM took {takeover:.2f}s"
    assert "released advisory lock" in leader.log()
    assert Node.objects.get(name=leader.name).stopped_at is not None
    wait_for_runs(2, node=new_leader)
    assert_exactly_once()


@pytest.mark.server
def test_a_replica_whose_clock_is_an_hour_off_runs_slots_on_time(replicas):
    libs = glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")
    if not libs:
        pytest.skip("libfaketime is not installed (apt-get install faketime)")
    # LD_PRELOAD rather than the faketime wrapper, so signals reach the scheduler itself.
    (proc,) = replicas(
        1,
        env={"LD_PRELOAD": libs[0], "FAKETIME": "-1h", "FAKETIME_DONT_FAKE_MONOTONIC": "1"},
        names=["skewed"],
    )
    proc.wait_for_log("running groups")
    # Prove the skew is real: the process's own log timestamps are an hour behind.
    logged = datetime.strptime(proc.log()[:19], "%Y-%m-%d %H:%M:%S")
    skew = datetime.now() - logged
    assert timedelta(minutes=59) < skew < timedelta(minutes=61), skew
    wait_for_runs(5, timeout=30)
    runs = assert_exactly_once()
    for run in runs:
        assert run.started_at >= run.slot, f"{run.slot} started early at {run.started_at}"
        # The skew is an hour: a run late by it would be ~3,600 s late. A bound near a second
        # would test the machine's load instead (a first slot can start a second or two late).
        late = (run.started_at - run.slot).total_seconds()
        assert late < 60, f"{run.slot} started {late:.0f}s late: by the host clock's skew?"
    assert proc.alive()
    assert proc.stop() == 0
    # Every session the scheduler opened is gone (a server may take a moment to reap one).
    wait_until(lambda: other_sessions() == [], timeout=5, message=f"left: {other_sessions()}")


@pytest.mark.server
def test_a_transactional_run_killed_mid_job_rolls_back_and_runs_again(replicas):
    procs = [replicas.extra(f"crash-{i}", "hatest_crash") for i in range(2)]
    first = wait_until(
        lambda: next((p for p in procs if "working on slot" in p.log()), None), timeout=15
    )
    slot = first.log().split("working on slot ")[1].split()[0]
    first.signal(signal.SIGKILL)
    other = next(p for p in procs if p is not first)
    other.wait_for_log("succeeded", timeout=15)
    run = wait_until(
        lambda: (
            JobRun.objects.filter(job="hatest.crashy", status="succeeded").order_by("slot").first()
        ),
        timeout=15,
    )
    assert run.slot.isoformat() == slot, "the killed slot is the first to succeed, by the survivor"
    assert run.node == other.name
    effects = Counter(Effect.objects.filter(job="hatest.crashy").values_list("slot", flat=True))
    assert max(effects.values()) == 1


@pytest.mark.server
def test_a_claim_first_run_killed_mid_job_is_marked_abandoned(replicas):
    procs = [replicas.extra(f"slow-{i}", "hatest_slow") for i in range(2)]
    running = wait_until(
        lambda: JobRun.objects.filter(job="hatest.slow", status="running").first(), timeout=15
    )
    victim = next(p for p in procs if p.name == running.node)
    victim.signal(signal.SIGKILL)
    abandoned = wait_until(
        lambda: JobRun.objects.filter(pk=running.pk, status="abandoned").first(), timeout=15
    )
    # The server closed every session of the killed process: no need to wait for the lease.
    assert abandoned.error == VANISHED_REASON
    assert JobRun.objects.filter(job="hatest.slow", slot=running.slot).count() == 1


def test_a_node_name_in_use_is_refused_and_a_restart_under_the_same_name_waits(replicas):
    (first,) = replicas(1, names=["same-name"])
    first.wait_for_log("running groups")
    (second,) = replicas(1, names=["same-name"])
    assert second.wait(timeout=20) != 0
    assert "node name 'same-name' is in use by pid" in second.log()
    assert "Waiting for it to go stale" in second.log()
    # A crashed process's successor (same name, as after a container restart) starts once the
    # old heartbeat is stale, without anyone cleaning up.
    first.signal(signal.SIGKILL)
    before = JobRun.objects.filter(job=JOB, node="same-name").count()
    (third,) = replicas(1, names=["same-name"])
    third.wait_for_log("running groups", timeout=15)
    wait_for_runs(before + 1, node="same-name", timeout=15)
