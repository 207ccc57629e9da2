"""A PostgreSQL primary fails over to its standby under three live scheduler replicas.

Real servers (``devtools.pgreplica``: ``pg_basebackup -R`` streaming replication), real
``runscheduler`` processes reaching them through libpq's multi-host ``DATABASE_URL``, and a
real failover: the primary is stopped with ``-m immediate`` and the standby promoted while
posts fall due and jobs run. Advisory locks are not replicated, so leadership is won again on
the new primary; what must survive is the ledger and the posts' states.

- Synchronous replication loses no commit: no slot runs twice, no post is published twice or
  lost, every published event reaches a transactional subscriber exactly once (its
  deliveries queued across the failover), and scheduling resumes on the new primary by
  itself.
- Asynchronous replication can lose the last commits. The test makes that certain (the
  standby is held back before the failover) and checks that the node that ran the lost slots
  says so, loudly, and that a claim-first job's lost run is written back rather than run
  again.
"""

import re
from collections import Counter
from datetime import timedelta

import psycopg
import pytest
from django.db import connections

from coordination.models import JobRun
from devtools.pgcluster import find_bindir
from devtools.pgreplica import ReplicatedPair
from instatic.database_url import database_from_url
from publishing.models import Post, PublishEvent
from tests.jobsapp.models import Effect
from tests.support.polling import wait_until
from tests.support.processes import BASE_DIR, ManagedProcess, process_env

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.postgresql,
    pytest.mark.skipif(find_bindir() is None, reason="PostgreSQL server binaries not installed"),
]

ALIAS = "failover"
TICK, SLOW = "hatest.tick", "hatest.slow"
POSTS = 60


@pytest.fixture
def cluster(request, django_db_blocker):
    """A replicated pair (``request.param``: synchronous or not) as the ``failover`` alias."""
    with ReplicatedPair(synchronous=request.param) as pair:
        env = process_env(DATABASE_URL=pair.url())
        migrate = ManagedProcess(["migrate", "--no-input", "-v", "0"], name="migrate", env=env)
        assert migrate.wait(timeout=180) == 0, migrate.log()
        migrate.stop()
        connections.settings[ALIAS] = {
            **connections.settings["default"],
            **database_from_url(pair.url(), default_sqlite_path=BASE_DIR / "unused"),
            "TEST": {},
        }
        with django_db_blocker.unblock():
            try:
                yield pair
            finally:
                connections[ALIAS].close()
                del connections[ALIAS]
                connections.settings.pop(ALIAS)


def db(action):
    """Run ``action`` against the pair, reconnecting (to the new primary) until it works."""

    def attempt():
        try:
            return action()
        except Exception:
            connections[ALIAS].close()
            return None

    return wait_until(lambda: attempt(), timeout=60, message="the pair never answered")


def start_replicas(schedulers, pair, env, *, plugins: bool = False):
    groups = ("publishing", "hatest", "hatest_slow", *(["plugins"] if plugins else []))
    return [
        schedulers(f"fo-{i}", *groups, env={"DATABASE_URL": pair.url(), **env}) for i in range(3)
    ]


def schedule_posts(*, start: float, every: float) -> None:
    """Schedule ``POSTS`` posts, the first due in ``start`` seconds (database clock)."""

    def create():
        with connections[ALIAS].cursor() as cursor:
            cursor.execute("SELECT now()")
            now = cursor.fetchone()[0]
        Post.objects.using(ALIAS).bulk_create(
            Post(
                title=f"Failover {i}",
                slug=f"failover-{i}",
                body="body",
                status=Post.Status.SCHEDULED,
                publish_at=now + timedelta(seconds=start + i * every),
            )
            for i in range(POSTS)
        )
        return True

    db(create)


def succeeded(job: str) -> int:
    return (
        db(
            lambda: (
                1
                + JobRun.objects.using(ALIAS)
                .filter(job=job, status=JobRun.Status.SUCCEEDED)
                .count()
            )
        )
        - 1
    )


def assert_each_slot_ran_at_most_once() -> None:
    effects = db(lambda: list(Effect.objects.using(ALIAS).values_list("job", "slot")))
    doubled = {key: n for key, n in Counter(effects).items() if n > 1}
    assert not doubled, f"slots that ran twice: {doubled}"


def assert_every_post_published_once() -> None:
    def published():
        return list(
            PublishEvent.objects.using(ALIAS)
            .filter(kind=PublishEvent.Kind.PUBLISHED)
            .values_list("post_id", flat=True)
        )

    wait_until(lambda: len(db(published) or [0]) >= POSTS, timeout=90, message="posts not out")
    counts = Counter(db(published))
    assert not {post: n for post, n in counts.items() if n > 1}, "a post was published twice"
    statuses = db(lambda: Counter(Post.objects.using(ALIAS).values_list("status", flat=True)))
    assert statuses == {Post.Status.PUBLISHED: POSTS}


def promoted_at_database_time(pair) -> object:
    with psycopg.connect(pair.url(), autocommit=True) as conn:
        return conn.execute("SELECT now()").fetchone()[0]


def runs_after(job: str, instant) -> int:
    return (
        db(
            lambda: (
                1
                + JobRun.objects.using(ALIAS)
                .filter(job=job, status=JobRun.Status.SUCCEEDED, slot__gt=instant)
                .count()
            )
        )
        - 1
    )


ENV = {"HATEST_WORK_SECONDS": "0", "HATEST_SLOW_SECONDS": "0.3", "INSTATIC_DB_RETRY_MAX": "1"}


def assert_every_event_delivered_once() -> None:
    """Each published event's transactional delivery (tests/outbox/subscriberapp) committed
    its effect once."""

    def published():
        return set(
            PublishEvent.objects.using(ALIAS)
            .filter(kind=PublishEvent.Kind.PUBLISHED)
            .values_list("pk", flat=True)
        )

    def effects():
        return Counter(
            Effect.objects.using(ALIAS)
            .filter(job__startswith="event-")
            .values_list("job", flat=True)
        )

    wait_until(lambda: len(db(effects) or {}) >= POSTS, timeout=90, message="events not delivered")
    assert db(effects) == Counter({f"event-{pk}": 1 for pk in db(published)})


SUBSCRIBER = {
    "INSTATIC_TEST_EXTRA_APPS": "tests.outbox.subscriberapp",
    "SUBSCRIBER_WORK_SECONDS": "0.02",
}


@pytest.mark.parametrize("cluster", [True], indirect=True, ids=["synchronous"])
def test_a_synchronous_failover_loses_nothing_and_runs_nothing_twice(cluster, schedulers):
    procs = start_replicas(schedulers, cluster, {**ENV, **SUBSCRIBER}, plugins=True)
    schedule_posts(start=3, every=0.25)
    wait_until(lambda: succeeded(TICK) >= 3 and succeeded(SLOW) >= 2, timeout=60)

    cluster.fail_over()
    promoted = promoted_at_database_time(cluster)
    # Scheduling resumes on the new primary by itself: runs of slots after the promotion.
    wait_until(lambda: runs_after(TICK, promoted) >= 3, timeout=60, message="no runs after")
    wait_until(lambda: runs_after(SLOW, promoted) >= 2, timeout=60, message="no slow runs")

    assert_every_post_published_once()
    assert_every_event_delivered_once()
    assert_each_slot_ran_at_most_once()
    assert all(proc.alive() for proc in procs), "a replica died in the failover"
    for proc in procs:
        assert "ledger went backwards" not in proc.log()


def lose_runs(cluster) -> None:
    """Fail over once the standby has missed runs of both jobs (async: they are lost)."""
    wait_until(lambda: succeeded(TICK) >= 2 and succeeded(SLOW) >= 1, timeout=60)
    cluster.hold_back_standby()
    tick, slow = succeeded(TICK), succeeded(SLOW)
    # Commits the standby will never see.
    wait_until(lambda: succeeded(TICK) >= tick + 3 and succeeded(SLOW) >= slow + 2, timeout=60)
    cluster.fail_over()


def resumed(cluster) -> None:
    promoted = promoted_at_database_time(cluster)
    wait_until(lambda: runs_after(TICK, promoted) >= 2, timeout=60, message="no runs after")
    wait_until(lambda: runs_after(SLOW, promoted) >= 1, timeout=60, message="no slow runs")


def slow_runs_in_logs(procs) -> Counter:
    """How often each slot of the claim-first job ran, by the nodes' own logs."""
    return Counter(
        slot
        for proc in procs
        for slot in re.findall(r"job hatest\.slow slot (\S+) succeeded", proc.log())
    )


LOST = r"ledger went backwards: job {job} slot (\S+) "


@pytest.mark.parametrize("cluster", [False], indirect=True, ids=["asynchronous"])
def test_a_node_writes_back_the_claim_first_runs_an_asynchronous_failover_lost(cluster, schedulers):
    (node,) = procs = [
        schedulers("fo-0", "hatest", "hatest_slow", env={"DATABASE_URL": cluster.url(), **ENV})
    ]
    lose_runs(cluster)
    node.wait_for_log(LOST.format(job=r"hatest\.tick"), timeout=60)
    node.wait_for_log(LOST.format(job=r"hatest\.slow") + r".*written back", timeout=60)
    resumed(cluster)

    written_back = db(
        lambda: set(
            JobRun.objects.using(ALIAS)
            .filter(job=SLOW, error__contains="written back")
            .values_list("slot", flat=True)
        )
    )
    reported = set(re.findall(LOST.format(job=r"hatest\.slow"), node.log()))
    assert {slot.isoformat() for slot in written_back} == reported
    # Written back, so not run again: each slot of the claim-first job ran once. (The
    # transactional job's lost slots run again, which is right: their effects were lost too.)
    assert not {s: n for s, n in slow_runs_in_logs(procs).items() if n > 1}
    assert "ran twice" not in node.log()


@pytest.mark.parametrize("cluster", [False], indirect=True, ids=["asynchronous"])
def test_with_three_replicas_each_run_an_asynchronous_failover_lost_is_reported(
    cluster, schedulers
):
    """Another node may take over and claim a lost slot before the node that ran it has
    looked: then the slot ran twice, and that node says so. Nothing goes unreported."""
    procs = start_replicas(schedulers, cluster, ENV)
    lose_runs(cluster)
    # Reported as lost, or as run twice where another node claimed the slot first.
    reported = LOST.format(job=r"hatest\.slow") + r"|job hatest\.slow slot \S+ ran twice"
    wait_until(
        lambda: any(re.search(reported, p.log()) for p in procs),
        timeout=60,
        message="no node reported the runs the failover lost",
    )
    resumed(cluster)
    assert all(proc.alive() for proc in procs)
    logs = "".join(proc.log() for proc in procs)
    for slot, count in slow_runs_in_logs(procs).items():
        if count > 1:
            assert re.search(
                rf"job hatest\.slow slot {re.escape(slot)} ran twice|"
                rf"{re.escape(slot)} ran on this node.*may have run twice",
                logs,
            )
