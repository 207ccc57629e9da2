"""Publish events with real processes: a replica SIGKILLed in the middle of a delivery,
then the database server restarted in the middle of another.

Two ``runscheduler`` replicas run the plugins group with the test subscriber
(``tests/outbox/subscriberapp``: transactional, one ``Effect`` per event) and a webhook
endpoint on a loopback receiver. The leader is killed while a delivery's transaction is
open; the survivor takes over, and (on the servers the suite starts) the database restarts
while the survivor's delivery transaction is open, with deliveries still queued. Every
event must then reach the transactional subscriber exactly once and the webhook at least
once, each delivery succeeded once, nothing left open.
"""

import signal

import pytest
from django.db import connection
from django.db.models import Count

from outbox.models import Delivery, WebhookEndpoint
from publishing.models import PublishEvent
from tests.jobsapp.models import Effect
from tests.publishing.conftest import make_post
from tests.support.databases import suite_server
from tests.support.polling import wait_until
from tests.support.webhook_receiver import Behaviour, WebhookReceiver

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]

ENV = {
    "INSTATIC_TEST_EXTRA_APPS": "tests.outbox.subscriberapp",
    "HATEST_SLOW_SECONDS": "0.3",
    "INSTATIC_WEBHOOK_ALLOW_PRIVATE": "1",
    "INSTATIC_WEBHOOK_ALLOW_HTTP": "1",
    "INSTATIC_WEBHOOK_RETRY_BACKOFF": "1",
    # The killed replica's webhook lane frees its endpoint after this long, like its lease.
    "INSTATIC_WEBHOOK_LANE_LEASE": "3",
}
EVENTS = 6


def test_a_replica_killed_mid_delivery_loses_nothing_and_doubles_nothing(schedulers):
    with WebhookReceiver(Behaviour(body=b"answer 200")) as hook:
        WebhookEndpoint.objects.create(
            name="hook",
            url=hook.url(),
            events=["published"],
            secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        )
        for _ in range(EVENTS):
            PublishEvent.objects.create(post=make_post(status="published"), kind="published")

        first = schedulers("outbox-a", "plugins", env=ENV)
        first.wait_for_log(r"delivering event \d+", timeout=120)
        first.signal(signal.SIGKILL)
        first.wait()
        second = schedulers("outbox-b", "plugins", env=ENV)
        server = suite_server()
        if server is not None:
            second.wait_for_log(r"delivering event \d+", timeout=120)
            connection.close()
            server.restart()
            connection.close()

        # A webhook attempt lost with the killed node is retried after its back-off (1 s), by
        # the run that follows its abandoned one at once: well within the subscribers' 60 s
        # fallback, which would mean a wake-up was lost.
        done = wait_until(
            lambda: Delivery.objects.filter(status="succeeded").count() == 2 * EVENTS,
            timeout=45,
            fail=False,
        )
        requests = hook.requests
    rows = list(Delivery.objects.values("subscriber", "status", "attempts", "last_error"))
    assert done, rows

    events = set(PublishEvent.objects.values_list("pk", flat=True))
    per_event = dict(Effect.objects.values_list("job").annotate(n=Count("id")))
    assert per_event == {f"event-{pk}": 1 for pk in events}  # exactly once, none lost
    seen = {r.headers["webhook-id"] for r in requests}
    webhook_ids = set(
        Delivery.objects.filter(subscriber__startswith="webhook:").values_list(
            "delivery_id", flat=True
        )
    )
    assert seen == {str(i) for i in webhook_ids}  # at least once each, by its delivery id
    assert not Delivery.objects.filter(finished_at__isnull=True).exists()
