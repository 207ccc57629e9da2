"""Run-history retention: the newest N runs of every job are kept, the rest go in one DELETE."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from coordination.clock import database_now
from coordination.models import JobRun
from plugins.builtin import retention
from plugins.builtin.retention import prune_runs
from plugins.testing import context_for

pytestmark = pytest.mark.django_db


def ledger(job: str, count: int, *, status=JobRun.Status.SUCCEEDED, start=None) -> list:
    start = start or database_now() - timedelta(days=30)
    JobRun.objects.bulk_create(
        [
            JobRun(job=job, slot=start + timedelta(minutes=i), status=status, node="n")
            for i in range(count)
        ]
    )
    return list(JobRun.objects.filter(job=job).order_by("-slot").values_list("slot", flat=True))


def slots(job: str) -> list:
    return list(JobRun.objects.filter(job=job).order_by("-slot").values_list("slot", flat=True))


def test_the_hourly_job_keeps_exactly_the_newest_200_runs_of_every_job():
    busy = ledger("example.beat", 250)
    other = ledger("publishing.publish_due", 201, status=JobRun.Status.MISSED)
    quiet = ledger("static_export.build", 20)
    with CaptureQueriesContext(connection) as queries:
        retention.prune(context_for(retention.prune))
    assert slots("example.beat") == busy[:200]
    assert slots("publishing.publish_due") == other[:200], "every group, every status"
    assert slots("static_export.build") == quiet
    deletes = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("DELETE") and "coordination_jobrun" in q["sql"].split("WHERE")[0]
    ]
    assert len(deletes) == 2, "one DELETE of runs per job that has too many runs"


@override_settings(INSTATIC_RUN_RETENTION=5)
def test_the_setting_decides_how_many_and_runs_in_progress_are_never_deleted():
    kept = ledger("example.digest", 8)
    old = database_now() - timedelta(days=60)
    JobRun.objects.create(job="example.digest", slot=old, status=JobRun.Status.RUNNING)
    JobRun.objects.create(
        job="example.digest",
        slot=old + timedelta(minutes=1),
        status=JobRun.Status.TIMED_OUT,
        error="still going",
    )
    retention.prune(context_for(retention.prune))
    assert slots("example.digest") == [*kept[:5], old + timedelta(minutes=1), old]


def test_zero_keeps_everything_and_should_stop_ends_early():
    ledger("a.job", 10)
    ledger("b.job", 10)
    assert prune_runs(keep=0) == {}
    assert prune_runs(keep=3, should_stop=lambda: True) == {}
    assert JobRun.objects.count() == 20
    assert prune_runs(keep=3) == {"a.job": 7, "b.job": 7}


def test_the_hourly_job_keeps_the_newest_leadership_terms_of_every_group_and_every_open_one():
    from coordination.models import LeadershipTerm

    now = database_now()
    for group, count in (("publishing", 5), ("plugins", 2)):
        LeadershipTerm.objects.bulk_create(
            [
                LeadershipTerm(
                    group=group,
                    node=f"n{i}",
                    instance=f"i{i}",
                    started_at=now - timedelta(hours=count - i),
                    ended_at=None if i == 0 else now - timedelta(hours=count - i, minutes=-30),
                    end_reason="" if i == 0 else "crashed",
                )
                for i in range(count)
            ]
        )
    with override_settings(INSTATIC_RUN_RETENTION=3):
        retention.prune(context_for(retention.prune))
    kept = {
        group: sorted(LeadershipTerm.objects.filter(group=group).values_list("node", flat=True))
        for group in ("publishing", "plugins")
    }
    # The three newest, and the oldest publishing term because it is still open.
    assert kept == {"publishing": ["n0", "n2", "n3", "n4"], "plugins": ["n0", "n1"]}


@pytest.mark.django_db(transaction=True)
def test_a_big_ledger_is_pruned_in_short_batches_oldest_first_each_its_own_transaction():
    kept = ledger("example.beat", 1_050)
    old = database_now() - timedelta(days=90)
    JobRun.objects.create(job="example.beat", slot=old, status=JobRun.Status.RUNNING)
    in_transaction = []

    def watch(execute, sql, params, many, context):
        # Django wraps each DELETE in a transaction of its own; the reads between them
        # must run outside any, or one transaction would span the batches.
        if sql.startswith("SELECT"):
            in_transaction.append(context["connection"].in_atomic_block)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch), CaptureQueriesContext(connection) as queries:
        deleted = prune_runs(keep=200, batch=300)
    assert deleted == {"example.beat": 850}
    assert slots("example.beat") == [*kept[:200], old], "the running row is spared"
    deletes = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("DELETE") and "coordination_jobrun" in q["sql"].split("WHERE")[0]
    ]
    assert len(deletes) == 3, "850 rows in batches of at most 300"
    assert not any(in_transaction), "each batch commits on its own"
    assert not any("DISTINCT" in q["sql"] for q in queries.captured_queries)


def test_should_stop_is_honoured_between_batches():
    ledger("example.beat", 1_000)
    calls = []

    def stop_after_two_batches():
        calls.append(1)
        return len(calls) > 3  # the job check, then one per batch

    deleted = prune_runs(keep=100, batch=200, should_stop=stop_after_two_batches)
    assert deleted == {"example.beat": 400}
    assert JobRun.objects.count() == 600


@pytest.mark.django_db
def test_the_hourly_job_folds_away_nodes_stopped_longer_than_the_retention_keeping_their_terms():
    from coordination.liveness.nodes import STOPPED_NODE_RETENTION
    from coordination.models import LeadershipTerm, Node

    now = database_now()
    old = now - STOPPED_NODE_RETENTION - timedelta(hours=1)
    recent = now - timedelta(days=1)

    def node(name, *, heartbeat, stopped, role="scheduler"):
        Node.objects.create(
            name=name,
            role=role,
            instance=name,
            host="h",
            pid=1,
            started_at=heartbeat,
            last_heartbeat=heartbeat,
            stopped_at=stopped,
        )

    node("stopped-long-ago", heartbeat=old, stopped=old)
    node("died-long-ago", heartbeat=old, stopped=None)  # never marked stopped (SIGKILL)
    node("old-worker/worker-1", heartbeat=old, stopped=old, role="worker")
    node("stopped-yesterday", heartbeat=recent, stopped=recent)
    node("live", heartbeat=now, stopped=None)
    # An idle worker writes nothing while it waits: it is kept as long as any stopped node.
    node("idle/worker-1", heartbeat=recent, stopped=None, role="worker")
    LeadershipTerm.objects.create(
        group="publishing",
        node="stopped-long-ago",
        instance="stopped-long-ago",
        started_at=old - timedelta(hours=1),
        ended_at=old,
        end_reason="shutdown",
    )

    retention.prune(context_for(retention.prune))

    assert sorted(Node.objects.values_list("name", flat=True)) == [
        "idle/worker-1",
        "live",
        "stopped-yesterday",
    ]
    assert LeadershipTerm.objects.filter(node="stopped-long-ago").exists()
