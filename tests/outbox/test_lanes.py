"""Webhook lanes: every delivery in exactly one lane, a post's deliveries all in the same one,
each lane's job sending only its own, and the dispatcher waking only the lanes it gave work."""

import pytest
from django.test import override_settings

from coordination.clock import database_now
from coordination.registry import registry
from outbox import delivering, dispatch, lanes
from outbox.job_names import WEBHOOK_LANES, WEBHOOKS_JOBS
from outbox.models import Delivery, WebhookEndpoint
from outbox.webhooks.sending import subscriber_for
from plugins.testing import context_for
from publishing.models import PublishEvent
from tests.publishing.conftest import make_post
from tests.support.webhook_receiver import WebhookReceiver


@pytest.mark.parametrize(
    ("post_id", "event_id", "lane"),
    [
        (8, 1, 0),
        (5, 2, 1),
        (5, 3, 1),  # a post's later event: the same lane
        (None, 7, 3),  # no post (deleted before the event): by the event
        (None, 8, 0),
    ],
)
def test_a_delivery_goes_in_the_lane_of_its_post(post_id, event_id, lane):
    assert WEBHOOK_LANES == 4
    assert lanes.lane_of(post_id, event_id) == lane
    assert lanes.job_for("webhook:3", post_id, event_id) == f"outbox.webhooks.{lane + 1}"
    assert lanes.lane_of_job(f"outbox.webhooks.{lane + 1}") == lane


def test_a_subscribers_deliveries_are_its_own_jobs_and_an_endpoints_every_lanes():
    assert lanes.job_for("demo.index_post", 5, 2) == "demo.index_post"
    assert lanes.jobs_for(["demo.index_post", "webhook:3"]) == {"demo.index_post", *WEBHOOKS_JOBS}


@pytest.mark.django_db
def test_the_database_splits_deliveries_into_lanes_as_lane_of_does():
    rows = [(post, event) for event, post in enumerate([*range(1, 14), None, None, None], 1)]
    Delivery.objects.bulk_create(
        Delivery(event_id=event, post_id=post, subscriber="webhook:1", kind="published")
        for post, event in rows
    )
    by_pk = dict(Delivery.objects.values_list("pk", "event_id"))
    seen = []
    for lane in range(WEBHOOK_LANES):
        found = lanes.in_lane(Delivery.objects.all(), lane).values_list("post_id", "event_id")
        assert sorted(found, key=str) == sorted(
            [(post, event) for post, event in rows if lanes.lane_of(post, event) == lane], key=str
        )
        seen += list(found)
    assert len(seen) == len(rows) == len(by_pk), "every delivery in exactly one lane"


@pytest.mark.django_db
@override_settings(INSTATIC_WEBHOOK_ALLOW_PRIVATE=True, INSTATIC_WEBHOOK_ALLOW_HTTP=True)
def test_a_lanes_job_sends_only_the_posts_of_its_lane():
    posts = [make_post(status="published") for _ in range(8)]
    for post in posts:
        PublishEvent.objects.create(post=post, kind="published")
    with WebhookReceiver() as hook:
        endpoint = WebhookEndpoint.objects.create(
            name="cdn", url=hook.url(), events=["published"], secret="s3cret"
        )
        done = dispatch.dispatch(
            dispatch.targets([], dispatch.active_endpoints()), now=database_now(), limit=100
        )
        lane = lanes.lane_of(posts[0].pk, 0)
        ctx = context_for(registry.get(WEBHOOKS_JOBS[lane]))
        delivering.deliver_batch(subscriber_for(endpoint, lane=lane), ctx)
        mine = [post.pk for post in posts if lanes.lane_of(post.pk, 0) == lane]
        received = hook.wait_for(len(mine))

    assert done.jobs == {WEBHOOKS_JOBS[lanes.lane_of(post.pk, 0)] for post in posts}
    assert sorted(int(r.body.split(b'"post_id":')[1].split(b",")[0]) for r in received) == mine
    sent = Delivery.objects.filter(status="succeeded").values_list("post_id", flat=True)
    assert sorted(sent) == mine
    assert Delivery.objects.filter(status="pending").count() == len(posts) - len(mine)
