"""Prometheus metrics: process counters, cluster gauges, the scheduler's server, the web view.

Each test builds its own metric set in its own ``CollectorRegistry``, so nothing leaks between
tests and nothing is registered twice.
"""

import os
import socket
from datetime import timedelta
from unittest import mock

import pytest
from django.core.management.base import CommandError
from django.db import DatabaseError, connection
from django.db.models.functions import Now
from django.test import RequestFactory, override_settings
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from coordination.clock import database_now
from coordination.cluster_metrics import DatabaseCollector
from coordination.conf import settings as coordination_settings
from coordination.metrics import InstaticMetrics, observe_publish_lateness
from coordination.metrics_server import SchedulerMetrics
from coordination.models import Leadership, Node
from coordination.registry import Job
from coordination.schedules import Every
from coordination.views import metrics_view
from devtools.servers import free_port
from publishing.models import Post
from tests.deploy.support import http_get

HEALTH_TOKEN = "health-details-token-0123456789abcdefghij"
METRICS_TOKEN = "metrics-scrape-token-0123456789abcdefghij"
#: Reads this node's health details from the scheduler's server (see test_metrics_access.py).
DETAILS = {"Authorization": f"Bearer {HEALTH_TOKEN}"}


@pytest.fixture
def metrics():
    """Process metrics only: reading them needs no database."""
    return InstaticMetrics(CollectorRegistry(), cluster=False)


@pytest.fixture
def cluster_metrics():
    return InstaticMetrics(CollectorRegistry())


def sample(metrics, name, **labels):
    return metrics.registry.get_sample_value(name, labels)


def make_job(name="demo.job", group="plugins"):
    return Job(name=name, func=lambda ctx: None, group=group, schedule=Every(timedelta(minutes=1)))


def make_node(name, *, age=0.0, stopped=False, host="elsewhere", pid=1):
    now = database_now()
    return Node.objects.create(
        name=name,
        instance=f"i-{name}",
        host=host,
        pid=pid,
        started_at=now,
        last_heartbeat=now - timedelta(seconds=age),
        stopped_at=now if stopped else None,
    )


#: The scheduler node that reports the cluster gauges in these tests (see make_reporter).
REPORTER = "reporter"


def make_reporter():
    """Make ``REPORTER`` the live leader of the first group: the process that reports."""
    make_node(REPORTER)
    Leadership.objects.create(group="plugins", node=REPORTER, instance="r", key=2, since=Now())


def collected(collector=None) -> dict:
    """Return {(name, labels as a sorted tuple): value} from one collection."""
    values = {}
    for family in (collector or DatabaseCollector(node_name=REPORTER)).collect():
        for s in family.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return values


# --- process metrics --------------------------------------------------------------------------
def test_job_runs_are_counted_by_job_group_and_status_and_timed(metrics):
    feed = SchedulerMetrics(metrics)
    job = make_job()
    feed.job_run(job, "succeeded", 0.2)
    feed.job_run(job, "succeeded", 0.4)
    feed.job_run(job, "failed", 1.5)
    feed.job_run(job, "timed_out", None)
    labels = {"job": "demo.job", "group": "plugins"}
    assert sample(metrics, "instatic_job_runs_total", **labels, status="succeeded") == 2
    assert sample(metrics, "instatic_job_runs_total", **labels, status="failed") == 1
    assert sample(metrics, "instatic_job_runs_total", **labels, status="timed_out") == 1
    # A timeout has no duration: it is counted, not timed.
    assert sample(metrics, "instatic_job_run_duration_seconds_count", **labels) == 3
    assert sample(metrics, "instatic_job_run_duration_seconds_sum", **labels) == pytest.approx(2.1)
    assert sample(
        metrics, "instatic_job_run_duration_seconds_bucket", **labels, le="0.25"
    ) == pytest.approx(1)


def test_leader_changes_are_counted_per_group_and_node(metrics):
    feed = SchedulerMetrics(metrics)
    feed.leader_changed("publishing", "replica-1")
    feed.leader_changed("publishing", "replica-1")
    feed.leader_changed("plugins", "replica-1")
    total = "instatic_leader_changes_total"
    assert sample(metrics, total, group="publishing", node="replica-1") == 2
    assert sample(metrics, total, group="plugins", node="replica-1") == 1


def test_publish_lateness_is_a_histogram_never_negative(metrics):
    observe_publish_lateness(0.3, metrics=metrics)
    observe_publish_lateness(12, metrics=metrics)
    observe_publish_lateness(-1, metrics=metrics)  # a clock edge: counts as on time
    assert sample(metrics, "instatic_publish_lateness_seconds_count") == 3
    assert sample(metrics, "instatic_publish_lateness_seconds_sum") == pytest.approx(12.3)
    assert sample(metrics, "instatic_publish_lateness_seconds_bucket", le="0.5") == 2


def test_metric_sets_do_not_share_state():
    one = InstaticMetrics(CollectorRegistry(), cluster=False)
    two = InstaticMetrics(CollectorRegistry(), cluster=False)
    SchedulerMetrics(one).leader_changed("plugins", "a")
    assert sample(two, "instatic_leader_changes_total", group="plugins", node="a") is None


# --- cluster gauges from the database -----------------------------------------------------------
@pytest.mark.django_db
def test_live_nodes_and_leaders_come_from_the_database():
    lease = float(coordination_settings.LEASE)
    make_node("alive-1")
    make_node("alive-2", age=lease / 2)
    make_node("stale", age=lease + 5)
    make_node("gone", stopped=True)
    for group, node in [("publishing", "alive-1"), ("plugins", "stale")]:
        Leadership.objects.create(group=group, node=node, instance="x", key=1, since=Now())
    values = collected(DatabaseCollector(node_name="alive-1"))  # the only live leader
    assert values[("instatic_metrics_database_up", ())] == 1
    assert values[("instatic_live_nodes", ())] == 2
    leaders = {k: v for k, v in values.items() if k[0] == "instatic_group_leader"}
    # The stale node's leadership row is not a current leader.
    assert leaders == {("instatic_group_leader", (("group", "publishing"), ("node", "alive-1"))): 1}


@pytest.mark.django_db
def test_scheduled_post_backlog_by_state():
    make_reporter()
    now = database_now()
    for slug, offset, error in [
        ("waiting", 3600, ""),
        ("due-1", -10, ""),
        ("due-2", -3600, ""),
        ("failed", -60, "title is empty"),
    ]:
        Post.objects.create(
            title=slug,
            slug=slug,
            body="b",
            status="scheduled",
            publish_at=now + timedelta(seconds=offset),
            last_error=error,
        )
    Post.objects.create(title="draft", slug="draft", body="b")
    values = collected()
    backlog = {
        dict(k[1])["state"]: v for k, v in values.items() if k[0] == "instatic_scheduled_posts"
    }
    assert backlog == {"waiting": 1, "due": 2, "failed": 1}


@pytest.mark.django_db
def test_no_backlog_family_without_the_publishing_app():
    make_reporter()
    with mock.patch("coordination.cluster_metrics.apps.is_installed", return_value=False):
        values = collected()
    assert not any(k[0] == "instatic_scheduled_posts" for k in values)
    assert values[("instatic_live_nodes", ())] == 1


def test_a_database_error_is_reported_as_a_metric_not_a_failed_scrape():
    collector = DatabaseCollector()
    with mock.patch.object(DatabaseCollector, "_families", side_effect=DatabaseError("down")):
        assert collected(collector) == {("instatic_metrics_database_up", ()): 0}


# --- the web endpoint ---------------------------------------------------------------------------
@pytest.mark.django_db
@override_settings(INSTATIC_METRICS_TOKEN=METRICS_TOKEN)
def test_metrics_view_serves_the_prometheus_text_format():
    make_node("web-view-node")
    request = RequestFactory().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    response = metrics_view(request)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    # The web process reports its own metrics; a scheduler reports the cluster gauges.
    assert families["instatic_metrics_database_up"].samples[0].value == 1
    assert "instatic_live_nodes" not in families
    assert {"instatic_job_runs", "instatic_publish_lateness_seconds"} <= set(families)
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]


@pytest.mark.django_db
@override_settings(INSTATIC_METRICS_TOKEN=METRICS_TOKEN)
def test_metrics_url_is_routed(client):
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    assert response.status_code == 200
    assert b"instatic_metrics_database_up 1.0" in response.content


# --- the scheduler's own HTTP server ------------------------------------------------------------
@pytest.fixture
def served(cluster_metrics):
    servers = []

    def serve(**kwargs):
        server = SchedulerMetrics.serve("127.0.0.1", 0, metrics=cluster_metrics, **kwargs)
        servers.append(server)
        return server

    yield serve
    for server in servers:
        server.shutdown()
    connection.close()


@pytest.mark.django_db(transaction=True)
@override_settings(INSTATIC_HEALTH_TOKEN=HEALTH_TOKEN)
def test_serve_answers_metrics_and_this_nodes_health(served, cluster_metrics):
    server = served()
    assert server.thread.daemon
    base = f"http://127.0.0.1:{server.port}"
    SchedulerMetrics(cluster_metrics).job_run(make_job(), "succeeded", 0.1)
    status, body = http_get(f"{base}/metrics")
    assert status == 200
    assert 'instatic_job_runs_total{group="plugins",job="demo.job",status="succeeded"} 1.0' in body
    assert "instatic_metrics_database_up 1.0" in body

    status, body = http_get(f"{base}/healthz", headers=DETAILS)
    assert status == 503 and "not registered" in body

    # The process's own node, found by host name and pid like the scheduler registers it.
    node = make_node("me", host=socket.gethostname(), pid=os.getpid())
    status, body = http_get(f"{base}/healthz", headers=DETAILS)
    assert status == 200 and '"node": "me"' in body

    lease = float(coordination_settings.LEASE)
    Node.objects.filter(pk=node.pk).update(last_heartbeat=Now() - timedelta(seconds=lease + 2))
    status, body = http_get(f"{base}/healthz", headers=DETAILS)
    assert status == 503 and "last heartbeated" in body

    Node.objects.filter(pk=node.pk).update(last_heartbeat=Now(), stopped_at=Now())
    assert http_get(f"{base}/healthz", headers=DETAILS)[0] == 503


@pytest.mark.django_db(transaction=True)
@override_settings(INSTATIC_HEALTH_TOKEN=HEALTH_TOKEN)
def test_serve_health_by_node_name(served):
    server = served(node_name="named-node")
    make_node("named-node")
    status, body = http_get(f"http://127.0.0.1:{server.port}/healthz", headers=DETAILS)
    assert status == 200 and '"node": "named-node"' in body


def test_serve_on_a_busy_port_is_a_clean_command_error(metrics):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(CommandError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            SchedulerMetrics.serve("127.0.0.1", port, metrics=metrics)


def test_serve_binds_the_requested_port(metrics):
    port = free_port()
    server = SchedulerMetrics.serve("127.0.0.1", port, metrics=metrics)
    try:
        assert server.port == port
        assert http_get(f"http://127.0.0.1:{port}/metrics")[0] == 200
    finally:
        server.shutdown()


# --- the publishing app feeds lateness ----------------------------------------------------------
@pytest.mark.django_db
def test_publishing_a_due_post_observes_its_lateness(django_capture_on_commit_callbacks):
    from coordination.metrics import METRICS
    from publishing import batches

    before = sample(METRICS, "instatic_publish_lateness_seconds_count") or 0
    Post.objects.create(
        title="Late",
        slug="late",
        body="body",
        status="scheduled",
        publish_at=database_now() - timedelta(seconds=30),
    )
    with django_capture_on_commit_callbacks(execute=True):
        result = batches.publish_due(batch_size=10)
    assert len(result.done) == 1
    assert sample(METRICS, "instatic_publish_lateness_seconds_count") == before + 1
