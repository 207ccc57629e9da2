"""Three replicas through a real PgBouncer in transaction pooling mode stay exactly-once.

Session advisory locks are unsafe behind a transaction pooler; with
``INSTATIC_LOCK_MODE=transaction`` leadership is a lease claimed under
``pg_try_advisory_xact_lock``. The replicas reach the test database only through PgBouncer;
the test checks the ledger and the effects directly.
"""

import signal
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Subquery

from coordination.models import JobRun, Leadership, LockLease
from tests.jobsapp.models import Effect
from tests.support.pgbouncer import bouncer_for_test_database
from tests.support.polling import wait_until
from tests.support.processes import process_env, start_scheduler

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.postgresql,
    pytest.mark.django_db(transaction=True),
]

JOB = "hatest.tick"


@pytest.fixture
def bouncer():
    with bouncer_for_test_database() as server:
        yield server


@pytest.fixture
def bounced_replicas(bouncer):
    env = process_env(
        DATABASE_URL=bouncer.url(),
        INSTATIC_LOCK_MODE="transaction",
        INSTATIC_LEASE="3",
        INSTATIC_HEARTBEAT_INTERVAL="0.5",
        INSTATIC_MAX_TICK="0.5",
    )
    procs = [start_scheduler(f"bouncer-{i}", "hatest", env=env) for i in range(3)]
    yield procs
    for proc in procs:
        proc.stop()
        print(f"----- {proc.name} -----\n{proc.log()[-3000:]}")


def assert_exactly_once():
    runs = list(JobRun.objects.filter(job=JOB, status="succeeded").order_by("slot"))
    effects = Counter(Effect.objects.filter(job=JOB).values_list("slot", flat=True))
    assert effects and max(effects.values()) == 1, "a slot's effect was written twice"
    assert set(effects) == {run.slot for run in runs}
    return runs


def test_three_replicas_through_pgbouncer_run_each_slot_once(bounced_replicas):
    wait_until(lambda: JobRun.objects.filter(job=JOB, status="succeeded").count() >= 1, timeout=20)
    first = JobRun.objects.filter(job=JOB, status="succeeded").order_by("slot").first().slot
    wait_until(
        lambda: JobRun.objects.filter(
            job=JOB, status="succeeded", slot__gte=first + timedelta(seconds=6)
        ).exists(),
        timeout=30,
    )
    runs = assert_exactly_once()
    steps = {b.slot - a.slot for a, b in zip(runs, runs[1:], strict=False)}
    assert steps <= {timedelta(seconds=1)}, f"gaps: {sorted(steps)}"
    # Read in one statement, one snapshot: a takeover between two reads would part them.
    leader = Leadership.objects.filter(group="hatest").values("node")
    lease = LockLease.objects.filter(holder=Subquery(leader)).first()
    assert lease is not None, "the lease's holder is not the group's leader"
    # No session holds a session-level advisory lock: leadership is the lease.
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")
        assert cursor.fetchone()[0] == 0

    # Kill the leader: the lease runs out and another replica takes over, still exactly once.
    leader = next(p for p in bounced_replicas if p.name == lease.holder)
    leader.signal(signal.SIGKILL)
    killed = time.monotonic()
    wait_until(
        lambda: Leadership.objects.filter(group="hatest").exclude(node=leader.name).exists(),
        timeout=10,
    )
    assert time.monotonic() - killed <= 3 + 2, "takeover within the lease + 2 s"
    survivor = Leadership.objects.get(group="hatest").node
    wait_until(
        lambda: JobRun.objects.filter(job=JOB, status="succeeded", node=survivor).count() >= 2,
        timeout=10,
    )
    assert_exactly_once()
