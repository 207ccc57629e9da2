"""Webhook deliveries end to end: a publish event POSTed to a loopback endpoint, every
attempt recorded, retried with the same delivery id, given up and disabled, sent again."""

import json
import threading
from datetime import timedelta

import pytest
from django.test import override_settings

from coordination.clock import database_now
from coordination.models import Alert
from coordination.registry import registry
from outbox import delivering, dispatch
from outbox.models import Delivery, WebhookAttempt, WebhookEndpoint
from outbox.webhooks.secrets import new_secret
from outbox.webhooks.sending import subscriber_for
from plugins.testing import context_for
from publishing.models import PublishEvent
from tests.publishing.conftest import make_post
from tests.support.webhook_receiver import Behaviour, WebhookReceiver

loopback = override_settings(INSTATIC_WEBHOOK_ALLOW_PRIVATE=True, INSTATIC_WEBHOOK_ALLOW_HTTP=True)


def endpoint_for(url, **values):
    return WebhookEndpoint.objects.create(
        name="cdn", url=url, events=["published"], secret=new_secret(), **values
    )


def dispatch_and_send(endpoint):
    dispatch.dispatch(
        dispatch.targets([], dispatch.active_endpoints()), now=database_now(), limit=100
    )
    ctx = context_for(registry.get("outbox.webhooks"))
    return delivering.deliver_batch(subscriber_for(endpoint), ctx)


@pytest.mark.django_db
@loopback
def test_a_publish_event_is_posted_signed_and_its_attempt_recorded():
    post = make_post(status="published", title="Opening hours")
    event = PublishEvent.objects.create(post=post, kind="published", node="web-1")
    with WebhookReceiver(Behaviour(body=b"answer 200")) as hook:
        endpoint = endpoint_for(hook.url())
        dispatch_and_send(endpoint)
        (request,) = hook.wait_for(1)

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.subscriber) == ("succeeded", f"webhook:{endpoint.pk}")
    assert request.headers["webhook-id"] == str(delivery.delivery_id)
    assert b'"event":"published"' in request.body and b'"title":"Opening hours"' in request.body
    assert f'"event_id":{event.pk}'.encode() in request.body
    attempt = WebhookAttempt.objects.get()
    assert (attempt.ok, attempt.status_code, attempt.response_head) == (True, 200, "answer 200")


@pytest.mark.django_db
@loopback
def test_a_failed_attempt_is_retried_later_with_the_same_delivery_id():
    PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    with WebhookReceiver(Behaviour(status=500, body=b"answer 500")) as hook:
        endpoint = endpoint_for(hook.url())
        again = dispatch_and_send(endpoint)
        delivery = Delivery.objects.get()
        assert (delivery.status, delivery.attempts) == ("pending", 1)
        # 30 s, less up to half of it by jitter.
        assert again == delivery.due_at and again > database_now() + timedelta(seconds=13)
        assert again < database_now() + timedelta(seconds=31)

        hook.behaviour = Behaviour(status=204)
        Delivery.objects.update(due_at=database_now())
        dispatch_and_send(endpoint)
        first, second = hook.wait_for(2)

    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert Delivery.objects.get().status == "succeeded"
    assert list(WebhookAttempt.objects.order_by("id").values_list("status_code", "ok")) == [
        (500, False),
        (204, True),
    ]


@pytest.mark.django_db
@loopback
def test_a_delivery_failing_past_the_retry_window_disables_its_endpoint_with_an_alert():
    PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    with WebhookReceiver(Behaviour(close=True)) as hook:
        endpoint = endpoint_for(hook.url())
        dispatch.dispatch(
            dispatch.targets([], dispatch.active_endpoints()), now=database_now(), limit=100
        )
        Delivery.objects.update(created_at=database_now() - timedelta(days=2))
        dispatch_and_send(endpoint)

    delivery = Delivery.objects.get()
    assert delivery.status == "failed" and "closed the connection" in delivery.last_error
    endpoint.refresh_from_db()
    assert not endpoint.active and "closed the connection" in endpoint.disabled_reason
    assert Alert.objects.filter(subject="webhook cdn").exists()


@pytest.mark.django_db
@override_settings(INSTATIC_WEBHOOK_ALLOW_HTTP=True)
def test_a_private_address_is_refused_unless_allowed_and_the_refusal_recorded():
    PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    with WebhookReceiver(Behaviour(body=b"answer 200")) as hook:
        endpoint = endpoint_for(hook.url())
        dispatch_and_send(endpoint)
        assert hook.requests == []
    attempt = WebhookAttempt.objects.get()
    assert not attempt.ok and "not a public address" in attempt.error


@pytest.mark.django_db
def test_send_again_puts_a_given_up_delivery_back_with_its_id(admin_client):
    PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    endpoint = endpoint_for("https://hooks.example.com/x")
    dispatch.dispatch(dispatch.targets([], [endpoint]), now=database_now(), limit=10)
    Delivery.objects.update(status="failed", finished_at=database_now(), attempts=9)
    before = Delivery.objects.get()

    response = admin_client.post(
        "/admin/outbox/delivery/",
        {"action": "send_again", "_selected_action": [before.pk]},
        follow=True,
    )

    assert "1 delivery will be sent again." in response.content.decode()
    after = Delivery.objects.get()
    assert (after.status, after.finished_at, after.delivery_id) == (
        "pending",
        None,
        before.delivery_id,
    )


@pytest.mark.django_db
@loopback
@override_settings(INSTATIC_WEBHOOK_READ_TIMEOUT=0.2)
def test_an_endpoint_that_is_down_costs_a_few_timeouts_a_run_and_its_other_deliveries_wait():
    for _ in range(8):
        PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    with WebhookReceiver(Behaviour(delay=30)) as hook:
        endpoint = endpoint_for(hook.url())
        dispatch_and_send(endpoint)
        assert len(hook.requests) == 3  # then the batch ends

    statuses = list(Delivery.objects.order_by("event_id").values_list("status", "attempts"))
    assert statuses == [("pending", 1)] * 3 + [("pending", 0)] * 5  # not attempted: released
    assert not Delivery.objects.filter(run__isnull=False).exists()


@pytest.mark.django_db
@loopback
def test_an_endpoint_that_answers_gets_several_posts_at_once_each_posts_events_in_order():
    posts = [make_post(status="published") for _ in range(4)]
    for kind in ("published", "unpublished", "published"):
        for post in posts:
            PublishEvent.objects.create(post=post, kind=kind)
    lock, two_at_once = threading.Lock(), threading.Event()
    seen = {"requests": 0, "in_flight": 0, "most": 0}

    def answer(received):
        with lock:
            seen["requests"] += 1
            first = seen["requests"] == 1  # the batch's first attempt goes alone
            seen["in_flight"] += 1
            seen["most"] = max(seen["most"], seen["in_flight"])
            if seen["in_flight"] >= 2:
                two_at_once.set()
        if not first:
            two_at_once.wait(5)  # one at a time, this would wait out its 5 s every time
        with lock:
            seen["in_flight"] -= 1
        return Behaviour(body=b"ok")

    with WebhookReceiver(answer) as hook:
        endpoint = endpoint_for(hook.url())
        endpoint.events = ["published", "unpublished"]
        endpoint.save()
        dispatch_and_send(endpoint)
        requests = hook.requests
    assert seen["most"] >= 2, "several requests were in flight at once"
    assert Delivery.objects.filter(status="succeeded").count() == 12
    sent = [json.loads(r.body) for r in requests]
    for post in posts:
        ids = [body["event_id"] for body in sent if body["post_id"] == post.pk]
        assert ids == sorted(ids) and len(ids) == 3, "a post's events in order"
    assert WebhookAttempt.objects.filter(ok=True).count() == 12
