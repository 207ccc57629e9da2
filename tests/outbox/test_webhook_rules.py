"""The Standard Webhooks delivery rules against real loopback receivers: 410 disables the
endpoint, 429 and 503 honour Retry-After, a refusal by the address rules is permanent."""

from datetime import timedelta

import pytest
from django.test import override_settings

from coordination.clock import database_now
from coordination.registry import registry
from outbox import delivering, dispatch
from outbox.models import Delivery, WebhookAttempt, WebhookEndpoint
from outbox.webhooks.secrets import new_secret
from outbox.webhooks.sending import subscriber_for
from plugins.testing import context_for
from publishing.models import PublishEvent
from tests.publishing.conftest import make_post
from tests.support.webhook_receiver import Behaviour, WebhookReceiver

pytestmark = pytest.mark.django_db

loopback = override_settings(INSTATIC_WEBHOOK_ALLOW_PRIVATE=True, INSTATIC_WEBHOOK_ALLOW_HTTP=True)


def send(url, events=1):
    for _ in range(events):
        PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    endpoint = WebhookEndpoint.objects.create(
        name="cdn", url=url, events=["published"], secret=new_secret()
    )
    dispatch.dispatch(
        dispatch.targets([], dispatch.active_endpoints()), now=database_now(), limit=100
    )
    ctx = context_for(registry.get("outbox.webhooks"))
    again = delivering.deliver_batch(subscriber_for(endpoint), ctx)
    endpoint.refresh_from_db()
    return endpoint, again


@loopback
def test_a_410_answer_disables_the_endpoint_and_its_deliveries_wait():
    with WebhookReceiver(Behaviour(status=410, body=b"gone")) as hook:
        endpoint, _again = send(hook.url(), events=3)
        assert len(hook.requests) == 1  # nothing more is sent once it said 410
    assert not endpoint.active and "410 Gone" in endpoint.disabled_reason
    assert set(Delivery.objects.values_list("status", flat=True)) == {"pending"}
    assert Delivery.objects.filter(attempts=1).count() == 1


@loopback
@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_honoured(status):
    with WebhookReceiver(Behaviour(status=status, headers={"Retry-After": "600"})) as hook:
        endpoint, again = send(hook.url())
    delivery = Delivery.objects.get()
    waited = delivery.due_at - WebhookAttempt.objects.get().at
    assert timedelta(seconds=590) < waited < timedelta(seconds=610)
    assert again == delivery.due_at and endpoint.active


@override_settings(INSTATIC_WEBHOOK_ALLOW_HTTP=True)
def test_a_refusal_by_the_address_rules_disables_at_once_naming_the_setting():
    with WebhookReceiver(Behaviour()) as hook:
        endpoint, again = send(hook.url())
        assert hook.requests == []
    assert not endpoint.active
    assert "INSTATIC_WEBHOOK_ALLOW_PRIVATE" in endpoint.disabled_reason
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 1) and again is None


@override_settings(DEBUG=True, INSTATIC_WEBHOOK_ALLOW_PRIVATE=True)
def test_with_debug_http_goes_to_loopback_only():
    with WebhookReceiver(Behaviour()) as hook:
        endpoint, _again = send(hook.url())
        assert len(hook.requests) == 1 and endpoint.active
    assert Delivery.objects.get().status == "succeeded"
