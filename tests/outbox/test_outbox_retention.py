"""Retention: finished deliveries, their attempts and people-told records older than the
setting are deleted in batches; waiting deliveries and newer records are kept."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from coordination.clock import database_now
from coordination.registry import registry
from outbox import retention
from outbox.models import Delivery, Told, WebhookAttempt, WebhookEndpoint
from plugins.testing import context_for
from publishing.models import PublishEvent
from tests.publishing.conftest import make_post

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    "days, expected",
    [(30, datetime(2026, 11, 1, 12, tzinfo=UTC)), (1, datetime(2026, 11, 30, 12, tzinfo=UTC))],
)
def test_cutoff(days, expected):
    assert retention.cutoff(NOW, days) == expected


def delivery(endpoint, *, finished_days_ago, attempted_days_ago):
    now = database_now()
    event = PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    finished = None if finished_days_ago is None else now - timedelta(days=finished_days_ago)
    row = Delivery.objects.create(
        event=event,
        subscriber=endpoint.ledger_name,
        kind="published",
        status="pending" if finished is None else "succeeded",
        finished_at=finished,
    )
    WebhookAttempt.objects.create(
        delivery=row,
        endpoint=endpoint,
        at=now - timedelta(days=attempted_days_ago),
        ok=finished is not None,
        duration=0.1,
    )
    return row


@pytest.mark.django_db
@override_settings(INSTATIC_OUTBOX_RETENTION_DAYS=30)
def test_the_prune_job_deletes_what_is_past_retention_and_keeps_what_waits():
    endpoint = WebhookEndpoint.objects.create(
        name="cdn", url="https://hooks.example.com/x", events=["published"], secret="whsec_x"
    )
    old = [delivery(endpoint, finished_days_ago=40, attempted_days_ago=40) for _ in range(5)]
    recent = delivery(endpoint, finished_days_ago=2, attempted_days_ago=2)
    waiting = delivery(endpoint, finished_days_ago=None, attempted_days_ago=45)
    user = User.objects.create_user("ed")
    now = database_now()
    Told.objects.create(event=old[0].event, user=user, at=now - timedelta(days=31))
    kept_told = Told.objects.create(event=recent.event, user=user, at=now - timedelta(days=29))

    original = retention.BATCH
    retention.BATCH = 2  # several batches, as on a big table
    try:
        registry.get("outbox.prune").func(context_for(registry.get("outbox.prune")))
    finally:
        retention.BATCH = original

    assert set(Delivery.objects.values_list("pk", flat=True)) == {recent.pk, waiting.pk}
    assert set(WebhookAttempt.objects.values_list("delivery_id", flat=True)) == {
        recent.pk,
        waiting.pk,
    }
    assert list(Told.objects.values_list("pk", flat=True)) == [kept_told.pk]


@pytest.mark.django_db
def test_prune_stops_between_batches_when_asked():
    endpoint = WebhookEndpoint.objects.create(
        name="cdn", url="https://hooks.example.com/x", events=["published"], secret="whsec_x"
    )
    for _ in range(5):
        delivery(endpoint, finished_days_ago=40, attempted_days_ago=40)
    asked = iter([False, True, True, True, True, True])
    before = database_now() - timedelta(days=30)
    deleted = retention.prune(before=before, should_stop=lambda: next(asked), batch=2)
    assert deleted == {"attempts": 2, "deliveries": 0, "told": 0}
    assert WebhookAttempt.objects.count() == 3 and Delivery.objects.count() == 5
