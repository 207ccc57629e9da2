"""Honest telemetry: no ``_created`` series, last success and missed slots per
job, cluster gauges from one process only, and a web process that keeps its connections."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.db.models.functions import Now
from prometheus_client import CollectorRegistry

from coordination import ledger
from coordination.clock import database_now
from coordination.cluster_metrics import DatabaseCollector
from coordination.metrics import METRICS, InstaticMetrics
from coordination.metrics_server import SchedulerMetrics
from coordination.models import JobRun, Leadership
from tests.deploy.test_metrics import METRICS_TOKEN, collected, make_job, make_node


def test_no_created_series_in_either_format():
    metrics = InstaticMetrics(CollectorRegistry(), cluster=False)
    SchedulerMetrics(metrics).job_run(make_job(), "succeeded", 0.1)
    metrics.missed_slots.labels(job="demo.job", group="plugins", reason="downtime").inc()
    for accept in ("", "application/openmetrics-text; version=1.0.0"):
        body, _ = metrics.render(accept)
        assert b"instatic_job_runs" in body
        assert b"_created" not in body, body.decode()


def missed(job, reason):
    labels = {"job": job.name, "group": job.group, "reason": reason}
    return METRICS.registry.get_sample_value("instatic_job_missed_slots_total", labels) or 0


@pytest.mark.django_db(transaction=True)
def test_missed_slots_are_counted_by_job_group_and_reason_once_committed():
    job = make_job()
    before = missed(job, "downtime"), missed(job, "paused")
    now = database_now().replace(microsecond=0)
    with transaction.atomic():
        ledger.record_missed(job, [now, now + timedelta(minutes=1)], reason="downtime")
    with pytest.raises(RuntimeError), transaction.atomic():
        ledger.record_missed(job, [now + timedelta(minutes=2)], reason="paused")
        raise RuntimeError("rolled back: not counted")
    assert missed(job, "downtime") - before[0] == 2
    assert missed(job, "paused") == before[1]


@pytest.mark.django_db
def test_last_success_timestamp_per_job_comes_from_the_run_ledger():
    make_node("lead")
    Leadership.objects.create(group="plugins", node="lead", instance="x", key=1, since=Now())
    older = JobRun.objects.create(
        job="a.job", slot=Now(), status=JobRun.Status.SUCCEEDED, finished_at=Now()
    )
    JobRun.objects.filter(pk=older.pk).update(finished_at=Now() - timedelta(hours=1))
    newest = JobRun.objects.create(
        job="a.job",
        slot=Now() + timedelta(minutes=1),
        status=JobRun.Status.SUCCEEDED,
        finished_at=Now(),
    )
    JobRun.objects.create(
        job="a.job",
        slot=Now() + timedelta(minutes=2),
        status=JobRun.Status.FAILED,
        finished_at=Now() + timedelta(hours=1),
    )
    newest.refresh_from_db()
    values = collected(DatabaseCollector(node_name="lead"))
    key = ("instatic_job_last_success_timestamp_seconds", (("job", "a.job"),))
    assert values[key] == pytest.approx(newest.finished_at.timestamp())


@pytest.mark.django_db
def test_cluster_gauges_come_from_the_leader_of_the_first_led_group_only():
    for name in ("node-a", "node-b", "node-c"):
        make_node(name)
    Leadership.objects.create(group="publishing", node="node-a", instance="x", key=1, since=Now())
    Leadership.objects.create(group="plugins", node="node-b", instance="y", key=2, since=Now())

    def families(node_name):
        return {name for name, _labels in collected(DatabaseCollector(node_name=node_name))}

    cluster = {"instatic_live_nodes", "instatic_group_leader"}
    assert cluster <= families("node-b"), "node-b leads plugins, the first group by name"
    for other in ("node-a", "node-c", None):  # another leader, a follower, the web process
        assert families(other) == {"instatic_metrics_database_up"}, other


@pytest.mark.django_db
def test_the_web_serves_process_metrics_without_cluster_gauges(client, settings):
    settings.INSTATIC_METRICS_TOKEN = METRICS_TOKEN
    make_node("some-node")
    body = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}").content
    assert b"instatic_job_runs" in body and b"instatic_live_nodes" not in body


@pytest.mark.every_vendor  # reads the vendor, not the database
def test_the_web_process_reuses_database_connections_with_health_checks():
    database = settings.DATABASES["default"]
    assert database["CONN_MAX_AGE"] is None or database["CONN_MAX_AGE"] > 0
    assert database["CONN_HEALTH_CHECKS"] is True
    assert connection.settings_dict["CONN_HEALTH_CHECKS"] is True
