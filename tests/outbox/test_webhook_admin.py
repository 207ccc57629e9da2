"""The webhook admin as operators use it: endpoint health in the list, secrets never shown
back, a delivery's payload, headers and attempts, and URLs refused when saved."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
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


def form(url, **extra):
    return {
        "name": "cdn",
        "url": url,
        "events": ["published"],
        "active": "on",
        "keep_old_secret_hours": "24",
        "webhook_attempts-TOTAL_FORMS": "0",
        "webhook_attempts-INITIAL_FORMS": "0",
        **extra,
    }


@loopback
def test_the_endpoint_list_shows_health(admin_client):
    with WebhookReceiver(Behaviour(status=500, body=b"down")) as hook:
        for _ in range(2):
            PublishEvent.objects.create(post=make_post(status="published"), kind="published")
        endpoint = WebhookEndpoint.objects.create(
            name="cdn", url=hook.url(), events=["published"], secret=new_secret()
        )
        dispatch.dispatch(
            dispatch.targets([], dispatch.active_endpoints()), now=database_now(), limit=10
        )
        delivering.deliver_batch(
            subscriber_for(endpoint), context_for(registry.get("outbox.webhooks"))
        )
    endpoint.refresh_from_db()
    first = WebhookAttempt.objects.order_by("at").first()
    assert endpoint.failing_since == first.at and endpoint.last_success_at is None

    page = admin_client.get("/admin/outbox/webhookendpoint/").content.decode()
    for words in ("Failing", "Failing since", "Last success", "Last attempt", "0% of 2"):
        assert words in page, words
    assert '<td class="field-waiting">2</td>' in page


def test_a_new_endpoint_gets_a_secret_shown_once_then_masked(admin_client):
    response = admin_client.post(
        "/admin/outbox/webhookendpoint/add/", form("https://hooks.example.com/x"), follow=True
    )
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.secret.startswith("whsec_")
    assert endpoint.secret in response.content.decode()  # once, in the message
    again = admin_client.get(f"/admin/outbox/webhookendpoint/{endpoint.pk}/change/")
    assert endpoint.secret not in again.content.decode()
    assert f"whsec_…{endpoint.secret[-4:]}" in again.content.decode()


def test_a_viewer_sees_only_the_secrets_last_characters(client):
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_webhookendpoint"))
    secret = new_secret()
    endpoint = WebhookEndpoint.objects.create(
        name="cdn", url="https://hooks.example.com/x", events=["published"], secret=secret
    )
    client.force_login(viewer)
    page = client.get(f"/admin/outbox/webhookendpoint/{endpoint.pk}/change/")
    assert page.status_code == 200
    assert secret not in page.content.decode() and secret[-4:] in page.content.decode()


def test_a_typed_secret_must_meet_the_specification(admin_client):
    response = admin_client.post(
        "/admin/outbox/webhookendpoint/add/",
        form("https://hooks.example.com/x", new_secret="s"),
    )
    assert "whsec_" in response.content.decode() and not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize(
    "url, setting",
    [
        ("https://127.0.0.1/x", "INSTATIC_WEBHOOK_ALLOW_PRIVATE"),
        ("https://10.1.2.3/x", "INSTATIC_WEBHOOK_ALLOW_PRIVATE"),
        ("https://localhost/x", "INSTATIC_WEBHOOK_ALLOW_PRIVATE"),
        ("http://hooks.example.com/x", "INSTATIC_WEBHOOK_ALLOW_HTTP"),
    ],
)
def test_a_url_the_address_rules_refuse_is_refused_when_saved(admin_client, url, setting):
    response = admin_client.post("/admin/outbox/webhookendpoint/add/", form(url))
    assert setting in response.content.decode() and not WebhookEndpoint.objects.exists()


@loopback
def test_a_deliverys_page_shows_its_payload_headers_and_attempts(admin_client):
    with WebhookReceiver(Behaviour(status=503, body=b"busy " * 200)) as hook:
        PublishEvent.objects.create(
            post=make_post(status="published", title="Hours"), kind="published"
        )
        endpoint = WebhookEndpoint.objects.create(
            name="cdn", url=hook.url(), events=["published"], secret=new_secret()
        )
        dispatch.dispatch(
            dispatch.targets([], dispatch.active_endpoints()), now=database_now(), limit=10
        )
        ctx = context_for(registry.get("outbox.webhooks"))
        delivering.deliver_batch(subscriber_for(endpoint), ctx)
        hook.behaviour = Behaviour(status=204, body=b"")
        Delivery.objects.update(due_at=database_now() - timedelta(seconds=1))
        delivering.deliver_batch(subscriber_for(endpoint), ctx)
        (first, second) = hook.wait_for(2)
    delivery = Delivery.objects.get()
    page = admin_client.get(f"/admin/outbox/delivery/{delivery.pk}/change/").content.decode()
    assert "&quot;title&quot;:&quot;Hours&quot;" in page  # the payload
    assert "webhook-id: " + str(delivery.delivery_id) in page
    assert "webhook-signature: v1,(redacted)" in page
    assert second.headers["webhook-signature"] not in page
    assert "HTTP 503: failed" in page and "HTTP 204: succeeded" in page
    assert "busy busy" in page and "UTC" in page
    listing = admin_client.get("/admin/outbox/webhookattempt/").content.decode()
    assert "HTTP 503: failed" in listing and "0.0000" not in listing
