"""Health endpoints: ``/healthz``, ``/readyz`` and the scheduler's ``/healthz/scheduler``.

Times are set relative to the database clock, as the endpoint compares them. The reasons are
read with the health token; what anonymous visitors see is in test_health_access.py.
"""

import json
from datetime import timedelta
from unittest import mock

import pytest
from django.db import OperationalError
from django.db.models.functions import Now
from django.test import RequestFactory, override_settings

from coordination.clock import database_now
from coordination.conf import settings as coordination_settings
from coordination.models import JobState, Node
from instatic import health
from publishing.models import Post

pytestmark = pytest.mark.django_db


TOKEN = "health-details-token-0123456789abcdefghij"


def call(view=health.scheduler_health):
    """Call ``view`` as a monitoring system with the health token does (it sees the reasons)."""
    request = RequestFactory().get("/healthz/scheduler", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    with override_settings(INSTATIC_HEALTH_TOKEN=TOKEN):
        response = view(request)
    return response.status_code, json.loads(response.content)


def make_node(name="node-1", *, age=0.0, stopped=False):
    now = database_now()
    return Node.objects.create(
        name=name,
        instance=f"i-{name}",
        host="h",
        pid=1,
        started_at=now,
        last_heartbeat=now - timedelta(seconds=age),
        stopped_at=now if stopped else None,
    )


def make_job_state(name="plugins.nightly", *, late_by: float, **fields):
    return JobState.objects.create(
        name=name,
        group="plugins",
        next_due=database_now() - timedelta(seconds=late_by),
        **fields,
    )


def make_post(slug="late-post", *, late_by: float, **fields):
    return Post.objects.create(
        title=slug,
        slug=slug,
        body="b",
        status="scheduled",
        publish_at=database_now() - timedelta(seconds=late_by),
        **fields,
    )


def test_healthz_and_readyz_answer():
    factory = RequestFactory()
    assert health.healthz(factory.get("/healthz")).status_code == 200
    assert health.readyz(factory.get("/readyz")).status_code == 200


def test_no_node_at_all_is_unavailable():
    status, body = call()
    assert status == 503
    assert body["status"] == "unavailable"
    assert "no scheduler node heartbeated within the lease" in body["reason"]


def test_a_live_node_and_nothing_late_is_ok():
    make_node()
    make_job_state(late_by=-30)  # due in 30s
    make_post(late_by=5)  # due 5s ago: within the threshold
    status, body = call()
    assert (status, body["status"], body["live_nodes"]) == (200, "ok", 1)


def test_stale_and_stopped_nodes_do_not_count():
    lease = float(coordination_settings.LEASE)
    make_node("stale", age=lease + 3)
    make_node("stopped", stopped=True)
    status, body = call()
    assert status == 503
    assert body["live_nodes"] == 0


def test_a_late_job_is_unavailable_with_its_name():
    make_node()
    make_job_state(late_by=health.DEFAULT_LATE_THRESHOLD + 30)
    status, body = call()
    assert status == 503
    assert "plugins.nightly" in body["reason"]
    assert body["late_jobs"] == ["plugins.nightly"]


def test_paused_and_retired_jobs_are_not_late():
    make_node()
    make_job_state("plugins.paused", late_by=600, paused=True)
    make_job_state("plugins.retired", late_by=600, retired_at=Now())
    assert call()[0] == 200


def test_the_threshold_is_a_setting():
    make_node()
    make_job_state(late_by=90)
    assert call()[0] == 503
    with override_settings(INSTATIC_HEALTH_LATE_THRESHOLD=120):
        assert call()[0] == 200


def test_a_late_scheduled_post_is_unavailable_unless_it_failed():
    make_node()
    make_post("failed-post", late_by=600, last_error="title is empty")
    assert call()[0] == 200
    make_post("late-post", late_by=600)
    status, body = call()
    assert status == 503
    assert body["late_posts"] == ["late-post"]
    assert "late-post" in body["reason"]


def test_posts_are_ignored_without_the_publishing_app():
    make_node()
    make_post(late_by=600)
    real = health.apps.is_installed
    with mock.patch.object(
        health.apps, "is_installed", side_effect=lambda name: name != "publishing" and real(name)
    ):
        assert call()[0] == 200


def test_a_database_error_is_a_503_with_a_reason():
    with mock.patch.object(health, "database_now", side_effect=OperationalError("gone\nmore")):
        status, body = call()
    assert status == 503
    assert body == {"status": "unavailable", "reason": "database: gone"}


def test_scheduler_health_is_routed_and_never_cached(client):
    make_node()
    response = client.get("/healthz/scheduler")
    assert response.status_code == 200
    assert "no-cache" in response["Cache-Control"]
    Node.objects.all().delete()
    assert client.get("/healthz/scheduler").status_code == 503
