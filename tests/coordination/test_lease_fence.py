"""Lease mode: a leader frozen just before its commit cannot commit once its lease has passed.

The leader is frozen (SIGSTOP) at exactly that point: a trigger the test installs makes the
run's "succeeded" update, the statement after the pre-commit check, wait for an advisory
lock the test holds; once the leader's session waits there, the test stops the process and
lets the statement finish, so its session sits idle in the open run transaction. The lease
runs out and a second node takes over; it judges heartbeats by a long lease, so it never
ends the frozen node's sessions by name (a pooler may not let it, and the fence must not
depend on it): only the lease check inside the run's own transaction stands between the
frozen leader and a stale commit. The transaction that records a failed run is frozen the same
way, at the failed run's insert (the gate's ``status="failed"``). Both through a real PgBouncer
in transaction pooling mode and straight to PostgreSQL.
"""

import re
import signal
from collections import Counter

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.test import override_settings

from coordination.locks.pgbouncer import PgBouncerLeaderLock
from coordination.models import JobRun, JobState, Leadership, LockLease
from devtools import commit_gate as commit_gate_sql
from tests.coordination.fencedcommitapp.jobs import GROUP
from tests.jobsapp.models import Effect
from tests.support.gates import AdvisoryGate
from tests.support.pgbouncer import bouncer_for_test_database
from tests.support.polling import wait_until
from tests.support.processes import database_url, process_env, start_scheduler

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

JOB = "fenced.tick"
LEASE = 3.0
GATE_KEY = 31031
OLD_NODE = "fence-old"
#: The frozen leader's transaction ends by its lease's end, and the new leader's first tick
#: follows; generous, as the machine is shared.
TAKEOVER_DEADLINE = LEASE + 12
ROLLED_BACK = re.compile(
    r"failed after the lock was lost; leaving it to the new leader|rolled back: lock lost"
)


def runs_seen(runs) -> list[tuple]:
    """The runs' slots, statuses and times, for a failure's message."""
    fields = ("slot", "status", "node", "started_at", "finished_at")
    return [tuple(str(value) for value in row) for row in runs.values_list(*fields)]


@pytest.fixture(params=["pgbouncer", "direct"])
def scheduler_url(request):
    if request.param == "direct":
        yield database_url()
        return
    with bouncer_for_test_database() as server:
        yield server.url()


def gate_on_runs(status: str, *, install=(), drop=()) -> AdvisoryGate:
    """The commit gate on JOB's runs with ``status`` (with statements of the test's own to
    install and drop along with it)."""
    return AdvisoryGate(
        GATE_KEY,
        install=[*install, *commit_gate_sql.install_sql(job=JOB, key=GATE_KEY, status=status)],
        drop=[*commit_gate_sql.drop_sql(), *drop],
    )


@pytest.fixture
def commit_gate():
    """Make a run's "succeeded" update of JOB wait while the test holds ``GATE_KEY``."""
    gate = gate_on_runs("succeeded")
    try:
        yield gate
    finally:
        gate.close()


@pytest.fixture
def failure_gate():
    """Make JOB's runs fail on OLD_NODE alone (its effect's insert raises), and the insert of
    such a failed run wait while the test holds ``GATE_KEY``."""
    table = Effect._meta.db_table
    gate = gate_on_runs(
        "failed",
        install=[
            "CREATE FUNCTION instatic_failing_node() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'this node fails the run'; END $$",
            f"CREATE TRIGGER instatic_failing_node BEFORE INSERT ON {table} FOR EACH ROW"
            f" WHEN (NEW.job = '{JOB}' AND NEW.node = '{OLD_NODE}')"
            " EXECUTE FUNCTION instatic_failing_node()",
        ],
        drop=[
            f"DROP TRIGGER IF EXISTS instatic_failing_node ON {table}",
            "DROP FUNCTION IF EXISTS instatic_failing_node()",
        ],
    )
    try:
        yield gate
    finally:
        gate.close()


@pytest.mark.multiprocess
def test_a_leader_frozen_before_its_commit_cannot_commit_after_its_lease_passed(
    scheduler_url, commit_gate
):
    common = {
        "DATABASE_URL": scheduler_url,
        "INSTATIC_LOCK_MODE": "transaction",
        "INSTATIC_TEST_EXTRA_APPS": "tests.coordination.fencedcommitapp",
        "INSTATIC_HEARTBEAT_INTERVAL": "0.5",
        "INSTATIC_MAX_TICK": "0.5",
    }
    old = start_scheduler("fence-old", GROUP, env=process_env(**common, INSTATIC_LEASE=LEASE))
    new = None
    try:
        # The leader's first run has passed its pre-commit check and waits at the gate.
        waiting = wait_until(commit_gate.waiting, timeout=30, message=old.log()[-3000:])
        assert Leadership.objects.get(group=GROUP).node == "fence-old"
        old.signal(signal.SIGSTOP)
        commit_gate.open()
        # The update has finished on the server; the frozen client will not send COMMIT.
        commit_gate.wait_passed(waiting, old.log()[-3000:])
        slot = JobState.objects.get(name=JOB).next_due
        new = start_scheduler("fence-new", GROUP, env=process_env(**common, INSTATIC_LEASE=60))

        took_over = wait_until(
            lambda: JobRun.objects.filter(job=JOB, slot=slot, status="succeeded").exists(),
            timeout=TAKEOVER_DEADLINE,
            fail=False,
        )
        old.signal(signal.SIGCONT)
        wait_until(
            lambda: (
                ROLLED_BACK.search(old.log())
                or JobRun.objects.filter(job=JOB, node="fence-old").exists()
            ),
            timeout=15,
        )
        run = JobRun.objects.get(job=JOB, slot=slot)
        assert run.node == "fence-new", (
            f"slot {slot} was committed by the frozen leader after its lease passed"
            f" (the new leader {'ran' if took_over else 'could not run'} it meanwhile)"
        )
        assert took_over, "the new leader ran the slot only after the frozen leader woke"
        assert LockLease.objects.get().holder == "fence-new"
        effects = Counter(Effect.objects.filter(job=JOB).values_list("slot", "node"))
        assert effects[(slot, "fence-new")] == 1
        assert max(effects.values()) == 1 and (slot, "fence-old") not in effects
        stale = JobRun.objects.filter(job=JOB, node="fence-old")
        others = JobRun.objects.filter(job=JOB).exclude(node="fence-old")
        assert not stale.exists(), (
            f"the frozen leader committed {runs_seen(stale)} (the test read slot {slot});"
            f" the other runs: {runs_seen(others)}\n{old.log()[-3000:]}"
        )
    finally:
        for proc in (old, new):
            if proc is not None:
                proc.stop()
                print(f"----- {proc.name} -----\n{proc.log()[-4000:]}")


@pytest.mark.multiprocess
def test_a_leader_frozen_recording_a_failure_cannot_record_it_after_its_lease_passed(
    scheduler_url, failure_gate
):
    """The same freeze in the transaction that records a failed run: the frozen leader's run
    fails (on that node alone), and it is frozen at the failed run's insert, after the
    transaction's fence. Its failure is not recorded once the lease has passed: the slot's
    row is the new leader's, which ran it meanwhile."""
    common = {
        "DATABASE_URL": scheduler_url,
        "INSTATIC_LOCK_MODE": "transaction",
        "INSTATIC_TEST_EXTRA_APPS": "tests.coordination.fencedcommitapp",
        "INSTATIC_HEARTBEAT_INTERVAL": "0.5",
        "INSTATIC_MAX_TICK": "0.5",
    }
    old = start_scheduler(OLD_NODE, GROUP, env=process_env(**common, INSTATIC_LEASE=LEASE))
    new = None
    try:
        waiting = wait_until(failure_gate.waiting, timeout=30, message=old.log()[-3000:])
        old.signal(signal.SIGSTOP)
        slot = JobState.objects.get(name=JOB).next_due
        failure_gate.open()
        failure_gate.wait_passed(waiting, old.log()[-3000:])
        new = start_scheduler("fence-new", GROUP, env=process_env(**common, INSTATIC_LEASE=60))

        took_over = wait_until(
            lambda: JobRun.objects.filter(job=JOB, slot=slot, status="succeeded").exists(),
            timeout=TAKEOVER_DEADLINE,
            fail=False,
        )
        old.signal(signal.SIGCONT)
        at = re.escape(f"job {JOB} slot {slot.isoformat()} failed after")
        verdict = re.compile(
            rf"{at} (?P<recorded>[0-9.]+s)"
            rf"|{at} the lock was lost; leaving it to the new leader"
        )
        found = wait_until(lambda: verdict.search(old.log()), timeout=15, message=old.log())
        run = JobRun.objects.get(job=JOB, slot=slot)
        assert (run.node, run.status) == ("fence-new", "succeeded"), (
            f"slot {slot}: {run.status} on {run.node} (the new leader"
            f" {'ran' if took_over else 'could not run'} it while the old one was frozen)"
        )
        assert took_over, "the new leader ran the slot only after the frozen leader woke"
        assert not found["recorded"], "the frozen leader recorded its failure after waking"
        assert not JobRun.objects.filter(job=JOB, node=OLD_NODE).exists()
        assert LockLease.objects.get().holder == "fence-new"
        assert Counter(Effect.objects.filter(job=JOB, slot=slot).values_list("node")) == {
            ("fence-new",): 1
        }
    finally:
        for proc in (old, new):
            if proc is not None:
                proc.stop()
                print(f"----- {proc.name} -----\n{proc.log()[-4000:]}")


# --- the fence itself, in one process: two lease locks and a work transaction ---------------


def idle_timeout_ms() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setting::int FROM pg_settings"
            " WHERE name = 'idle_in_transaction_session_timeout'"
        )
        return cursor.fetchone()[0]


@pytest.fixture
def side_session():
    """Another database session (autocommit), for what other nodes do meanwhile."""
    side = connections.create_connection(DEFAULT_DB_ALIAS)
    with side.cursor() as cursor:
        cursor.execute("SET lock_timeout = '2s'")  # a statement held up fails, never hangs
    yield side
    side.close()


def expire(lock, side) -> None:
    """Let ``lock``'s lease run out now, as it does when its holder stops renewing it."""
    with side.cursor() as cursor:
        cursor.execute(
            "UPDATE coordination_locklease SET expires_at = now() - interval '1 second'"
            " WHERE key = %s",
            (lock.key,),
        )


@pytest.fixture
def lease_locks():
    made = []

    def make(node):
        lock = PgBouncerLeaderLock("lease-fence-test", node_name=node)
        made.append(lock)
        return lock

    yield make
    for lock in made:
        lock.close()


@override_settings(INSTATIC_LOCK_MODE="transaction", INSTATIC_LEASE=3)
def test_a_fenced_transaction_keeps_the_lease_from_a_takeover_until_it_ends(
    lease_locks, side_session
):
    holder, other = lease_locks("holder"), lease_locks("other")
    assert holder.acquire()
    with transaction.atomic():
        assert holder.fence_work_transaction(connection)
        assert 2000 < idle_timeout_ms() <= 3000, "what the lease has left"
        # The holder's renewals (they change no key) are not held up by its fenced
        # transaction: the same update from another session goes through at once.
        with side_session.cursor() as cursor:
            cursor.execute(
                "UPDATE coordination_locklease SET expires_at = now() + interval '3 second'"
                " WHERE key = %s AND token = %s",
                (holder.key, holder.token),
            )
            assert cursor.rowcount == 1
        expire(holder, side_session)
        # The lease has run out, but the fenced transaction may still commit under it.
        assert not other.acquire()
    assert other.acquire(), "the takeover goes ahead once the fenced transaction ended"
    assert idle_timeout_ms() == 0, "the timeout was local to the fenced transaction"


@override_settings(INSTATIC_LOCK_MODE="transaction", INSTATIC_LEASE=3)
def test_the_fence_refuses_a_lease_that_passed_or_ran_out(lease_locks, side_session):
    holder, other = lease_locks("holder"), lease_locks("other")
    assert holder.acquire()
    expire(holder, side_session)
    with transaction.atomic():
        assert not holder.fence_work_transaction(connection), "ran out, nobody took it yet"
    assert not holder.acquired, "the holder knows it lost the lock"
    assert holder.acquire(), "its own expired lease: claimed again"
    expire(holder, side_session)
    assert other.acquire()
    with transaction.atomic():
        assert not holder.fence_work_transaction(connection), "passed to another node"
