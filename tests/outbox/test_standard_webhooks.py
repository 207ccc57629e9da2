"""Deliveries as the Standard Webhooks specification says, checked with its own library.

The receiver here is what an operator's endpoint would be: a real HTTP server on loopback
that verifies each request with the ``standardwebhooks`` package from PyPI, knowing one
secret, and answers 204 if it verifies and 401 if not.
"""

import base64
import os
from datetime import timedelta

import pytest
from django.test import override_settings
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from coordination.clock import database_now
from coordination.registry import registry
from outbox import delivering, dispatch
from outbox.models import Delivery, WebhookAttempt, WebhookEndpoint
from outbox.webhooks.sending import subscriber_for
from plugins.testing import context_for
from publishing.models import PublishEvent
from tests.publishing.conftest import make_post
from tests.support.webhook_receiver import Behaviour, WebhookReceiver

loopback = override_settings(INSTATIC_WEBHOOK_ALLOW_PRIVATE=True, INSTATIC_WEBHOOK_ALLOW_HTTP=True)


def typed_secret() -> str:
    """A secret as an operator would generate one elsewhere: whsec_ and 32 random bytes."""
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


class VerifyingReceiver:
    """Answers 204 to a request that verifies under the one secret it knows, 401 otherwise."""

    def __init__(self, secret: str):
        self.secret = secret
        self.verified: list[dict] = []

    def __call__(self, received) -> Behaviour:
        try:
            payload = Webhook(self.secret).verify(received.body, received.headers)
        except WebhookVerificationError:
            return Behaviour(status=401, body=b"bad signature")
        self.verified.append(payload)
        return Behaviour(status=204, body=b"")


def publish_and_send(endpoint: WebhookEndpoint) -> None:
    PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    dispatch.dispatch(
        dispatch.targets([], dispatch.active_endpoints()), now=database_now(), limit=100
    )
    Delivery.objects.filter(finished_at__isnull=True).update(due_at=database_now())
    endpoint.refresh_from_db()
    ctx = context_for(registry.get("outbox.webhooks"))
    delivering.deliver_batch(subscriber_for(endpoint), ctx)


def last_attempt() -> WebhookAttempt:
    return WebhookAttempt.objects.order_by("-id").first()


@pytest.mark.django_db
@loopback
def test_a_delivery_verifies_with_the_standard_webhooks_library_and_carries_its_headers():
    secret = typed_secret()
    verifier = VerifyingReceiver(secret)
    with WebhookReceiver(verifier) as hook:
        endpoint = WebhookEndpoint.objects.create(
            name="cdn", url=hook.url(), events=["published"], secret=secret
        )
        publish_and_send(endpoint)
        (request,) = hook.wait_for(1)

    delivery = Delivery.objects.get()
    assert delivery.status == "succeeded" and last_attempt().status_code == 204
    assert request.headers["webhook-id"] == str(delivery.delivery_id)
    assert request.headers["webhook-timestamp"].isdigit()
    assert request.headers["webhook-signature"].startswith("v1,")
    assert request.headers["Content-Type"] == "application/json"
    (payload,) = verifier.verified
    assert payload["event"] == "published" and payload["delivery_id"] == str(delivery.delivery_id)


@pytest.mark.django_db
@loopback
def test_a_secret_changed_in_the_admin_signs_with_both_during_its_window(admin_client):
    old, new = typed_secret(), typed_secret()
    verifier = VerifyingReceiver(old)
    with WebhookReceiver(verifier) as hook:
        endpoint = WebhookEndpoint.objects.create(
            name="cdn", url=hook.url(), events=["published"], secret=old
        )
        response = admin_client.post(
            f"/admin/outbox/webhookendpoint/{endpoint.pk}/change/",
            {
                "name": "cdn",
                "url": hook.url(),
                "events": ["published"],
                "new_secret": new,
                "keep_old_secret_hours": "24",
                "active": "on",
                "webhook_attempts-TOTAL_FORMS": "0",
                "webhook_attempts-INITIAL_FORMS": "0",
            },
        )
        assert response.status_code == 302, response.content.decode()[:3000]

        # The receiver still knows only the old secret: the rotation does not break it.
        publish_and_send(endpoint)
        assert last_attempt().status_code == 204
        # It learns the new one and forgets the old: deliveries verify still.
        verifier.secret = new
        publish_and_send(endpoint)
        assert last_attempt().status_code == 204
        assert len(verifier.verified) == 2

        # Once the window is over, only the new secret signs.
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            previous_secret_until=database_now() - timedelta(seconds=1)
        )
        publish_and_send(endpoint)
        assert last_attempt().status_code == 204
        verifier.secret = old
        publish_and_send(endpoint)
        assert last_attempt().status_code == 401
