"""Endpoints are sent side by side: a slow-loris endpoint costs only its own deliveries.

Real loopback receivers and the real ``outbox.webhooks`` job; the lanes it starts run on
threads of their own, with their own database connections (hence transactional tests).
"""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings

from coordination.clock import database_now
from coordination.registry import registry
from outbox import dispatch
from outbox.jobs import send_webhooks
from outbox.models import Delivery, WebhookAttempt, WebhookEndpoint
from outbox.webhooks import lanes
from plugins.testing import context_for
from publishing.models import PublishEvent
from tests.outbox.slowloris import SlowLorisReceiver
from tests.publishing.conftest import make_post
from tests.support.webhook_receiver import Behaviour, WebhookReceiver

pytestmark = pytest.mark.django_db(transaction=True)

loopback = override_settings(INSTATIC_WEBHOOK_ALLOW_PRIVATE=True, INSTATIC_WEBHOOK_ALLOW_HTTP=True)


def endpoint_for(name, url):
    return WebhookEndpoint.objects.create(
        name=name, url=url, events=["published"], secret=lanes_secret()
    )


def lanes_secret():
    from outbox.webhooks.secrets import new_secret

    return new_secret()


def dispatched():
    dispatch.dispatch(
        dispatch.targets([], dispatch.active_endpoints()), now=database_now(), limit=100
    )


def run_job_in_background():
    """Run one ``outbox.webhooks`` run on a thread of its own; return the thread."""
    ctx = context_for(registry.get("outbox.webhooks"))

    def run():
        try:
            send_webhooks(ctx)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="webhooks-run", daemon=True)
    thread.start()
    return thread


def wait_until(condition, timeout=10.0, message="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not met within {timeout} s")
        threading.Event().wait(0.01)


@loopback
@override_settings(INSTATIC_WEBHOOK_ATTEMPT_DEADLINE=120)
def test_a_slow_loris_endpoint_does_not_hold_up_a_healthy_one():
    PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    # Its answer would take 200 s: far longer than the healthy endpoint may take on any machine.
    with (
        SlowLorisReceiver(interval=0.05, header_bytes=4000) as slow,
        WebhookReceiver(Behaviour()) as healthy,
    ):
        # The slow endpoint comes first, as the job used to send them in order.
        stuck = endpoint_for("slow", slow.url())
        good = endpoint_for("healthy", healthy.url())
        dispatched()
        run = run_job_in_background()
        try:
            # Each lane goes at its own pace: the slow one's request may come after the
            # healthy delivery, or before it and then hold its lane.
            wait_until(lambda: slow.requests == 1, timeout=30, message="the slow request")
            healthy.wait_for(1, timeout=30)
            wait_until(
                lambda: Delivery.objects.filter(
                    subscriber=good.ledger_name, status="succeeded"
                ).exists(),
                timeout=30,
                message="the healthy endpoint's delivery recorded",
            )
            assert not WebhookAttempt.objects.filter(endpoint=stuck).exists(), (
                "the slow endpoint is still being answered, byte by byte"
            )
        finally:
            slow.release()
            run.join(timeout=30)
            lanes.wait_idle(timeout=30)
    assert not run.is_alive()


@loopback
@override_settings(INSTATIC_WEBHOOK_ATTEMPT_DEADLINE=0.5)
def test_a_slow_loris_attempt_ends_at_the_attempts_deadline_and_is_recorded_as_failed():
    PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    with SlowLorisReceiver(interval=0.05) as slow:
        endpoint = endpoint_for("slow", slow.url())
        dispatched()
        started = time.monotonic()
        send_webhooks(context_for(registry.get("outbox.webhooks")))
        wait_until(
            lambda: WebhookAttempt.objects.filter(endpoint=endpoint).exists(),
            message="the slow endpoint's attempt recorded",
        )
        elapsed = time.monotonic() - started
        lanes.wait_idle(timeout=30)
    attempt = WebhookAttempt.objects.get()
    assert not attempt.ok and "0.5 s in all" in attempt.error
    assert elapsed < 0.5 + 2.0
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 1)


@loopback
def test_an_endpoint_held_by_a_live_lane_elsewhere_gets_no_second_lane():
    PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    with WebhookReceiver(Behaviour()) as hook:
        endpoint = endpoint_for("held", hook.url())
        dispatched()
        held_until = database_now() + timedelta(minutes=1)
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            lane_token="00000000-0000-0000-0000-000000000001", lane_until=held_until
        )
        again = send_webhooks(context_for(registry.get("outbox.webhooks")))
        assert lanes.wait_idle(timeout=10)
        assert hook.requests == []
        # The job looks again when the hold ends, in case its lane was lost.
        assert again == held_until
        assert Delivery.objects.get().status == "pending"

        # Its hold runs out (the process holding it was lost): the next run sends.
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            lane_until=database_now() - timedelta(seconds=1)
        )
        send_webhooks(context_for(registry.get("outbox.webhooks")))
        assert lanes.wait_idle(timeout=10)
        hook.wait_for(1)
    assert Delivery.objects.get().status == "succeeded"
    endpoint.refresh_from_db()
    assert endpoint.lane_token is None and endpoint.lane_until is None


@loopback
def test_a_delivery_a_lost_lane_left_running_counts_as_a_failed_attempt_and_is_retried():
    PublishEvent.objects.create(post=make_post(status="published"), kind="published")
    with WebhookReceiver(Behaviour()) as hook:
        endpoint = endpoint_for("lost", hook.url())
        dispatched()
        # A lane claimed it, then its process died: running, no run, its hold run out.
        Delivery.objects.update(status="running", attempts=1, run=None)
        send_webhooks(context_for(registry.get("outbox.webhooks")))
        assert lanes.wait_idle(timeout=10)
        assert hook.requests == []
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert "ended without recording an outcome" in delivery.last_error
    assert delivery.due_at > database_now()
    endpoint.refresh_from_db()
    assert endpoint.lane_token is None
