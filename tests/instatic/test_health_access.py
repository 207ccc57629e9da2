"""Who sees what on the health and metrics endpoints.

Anonymous answers carry the status only: no post slugs, job names or database host and port.
Details need a staff login or ``Authorization: Bearer <INSTATIC_HEALTH_TOKEN>``; the web's
``/metrics`` needs a staff login or ``Authorization: Bearer <INSTATIC_METRICS_TOKEN>``.
"""

import json
from datetime import timedelta
from types import SimpleNamespace
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError
from django.test import override_settings

from coordination.clock import database_now
from coordination.models import Node
from instatic import health
from publishing.models import Post

pytestmark = pytest.mark.django_db

HEALTH_TOKEN = "health-token-0123456789-abcdefghijklmnopqrstuvwxyz"
METRICS_TOKEN = "metrics-token-0123456789-abcdefghijklmnopqrstuvwxyz"
TOKENS = override_settings(INSTATIC_HEALTH_TOKEN=HEALTH_TOKEN, INSTATIC_METRICS_TOKEN=METRICS_TOKEN)
SECRET_POST = "unannounced-merger-with-acme"


def bearer(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


@pytest.fixture
def late_post():
    now = database_now()
    Node.objects.create(
        name="n1", instance="i", host="h", pid=1, started_at=now, last_heartbeat=now
    )
    return Post.objects.create(
        title="Secret",
        slug=SECRET_POST,
        body="b",
        status="scheduled",
        publish_at=now - timedelta(hours=1),
    )


@pytest.fixture
def staff_client(client):
    client.force_login(User.objects.create_user("ed", password="pw", is_staff=True))
    return client


# --- /healthz/scheduler ---------------------------------------------------------------------
@TOKENS
def test_anonymous_scheduler_health_is_status_only(client, late_post):
    response = client.get("/healthz/scheduler")
    assert response.status_code == 503
    assert json.loads(response.content) == {"status": "unavailable"}
    assert SECRET_POST.encode() not in response.content


@TOKENS
def test_a_wrong_or_other_token_is_anonymous(client, late_post):
    for token in ["nope", METRICS_TOKEN, HEALTH_TOKEN + "x", ""]:
        response = client.get("/healthz/scheduler", **bearer(token))
        assert json.loads(response.content) == {"status": "unavailable"}, token


@TOKENS
def test_the_health_token_shows_the_details(client, late_post):
    assert json.loads(client.get("/healthz/scheduler").content) == {"status": "unavailable"}
    response = client.get("/healthz/scheduler", **bearer(HEALTH_TOKEN))
    assert response.status_code == 503
    body = json.loads(response.content)
    assert body["late_posts"] == [SECRET_POST]
    assert SECRET_POST in body["reason"]


def test_staff_see_the_details(client, staff_client, late_post):
    anonymous = client.__class__()
    assert json.loads(anonymous.get("/healthz/scheduler").content) == {"status": "unavailable"}
    body = json.loads(staff_client.get("/healthz/scheduler").content)
    assert body["late_posts"] == [SECRET_POST]


def test_without_a_configured_token_no_bearer_value_opens_the_details(client, late_post):
    with override_settings(INSTATIC_HEALTH_TOKEN=""):
        for token in ["", " ", "None"]:
            body = json.loads(client.get("/healthz/scheduler", **bearer(token)).content)
            assert body == {"status": "unavailable"}


def test_a_healthy_answer_is_status_only_too(client, late_post):
    late_post.delete()
    response = client.get("/healthz/scheduler")
    assert (response.status_code, json.loads(response.content)) == (200, {"status": "ok"})


# --- /readyz ----------------------------------------------------------------------------------
DB_DOWN = OperationalError(
    'connection to server at "10.1.2.3", port 5432 failed: Connection refused'
)


def test_anonymous_readiness_hides_the_database_error(client, caplog):
    with mock.patch.object(health, "MigrationExecutor", side_effect=DB_DOWN):
        response = client.get("/readyz")
    assert response.status_code == 503
    assert json.loads(response.content) == {"status": "unavailable"}
    # Operators still find the reason in the log.
    assert "10.1.2.3" in caplog.text


@TOKENS
def test_readiness_details_need_the_token(client):
    with mock.patch.object(health, "MigrationExecutor", side_effect=DB_DOWN):
        anonymous = json.loads(client.get("/readyz").content)
        body = json.loads(client.get("/readyz", **bearer(HEALTH_TOKEN)).content)
    assert anonymous == {"status": "unavailable"}
    assert body["status"] == "unavailable"
    assert "10.1.2.3" in body["reason"]


@TOKENS
def test_pending_migration_names_need_the_token(client):
    migration = SimpleNamespace(app_label="publishing", name="0099_secret_feature")
    with mock.patch.object(health, "MigrationExecutor") as executor:
        executor.return_value.migration_plan.return_value = [(migration, False)]
        anonymous = client.get("/readyz")
        detailed = json.loads(client.get("/readyz", **bearer(HEALTH_TOKEN)).content)
    assert (anonymous.status_code, json.loads(anonymous.content)) == (
        503,
        {"status": "unavailable"},
    )
    assert detailed["pending"] == ["publishing.0099_secret_feature"]


# --- /metrics on the web ------------------------------------------------------------------------
@TOKENS
def test_anonymous_metrics_are_refused(client):
    response = client.get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"instatic_" not in response.content


@TOKENS
def test_metrics_with_the_metrics_token(client):
    assert client.get("/metrics", **bearer(HEALTH_TOKEN)).status_code == 401
    response = client.get("/metrics", **bearer(METRICS_TOKEN))
    assert response.status_code == 200
    assert b"instatic_metrics_database_up" in response.content


def test_metrics_for_staff(client, staff_client):
    assert client.__class__().get("/metrics").status_code == 401
    assert staff_client.get("/metrics").status_code == 200


def test_without_a_metrics_token_anonymous_metrics_are_still_refused(client):
    with override_settings(INSTATIC_METRICS_TOKEN=""):
        assert client.get("/metrics", **bearer("")).status_code == 401
