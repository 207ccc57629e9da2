"""The dispatcher: every public change's event becomes one delivery per subscriber, once."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from coordination.clock import database_now
from coordination.registry import JobRegistry
from outbox.dispatch import Undispatched, dispatch, plan_deliveries, targets
from outbox.models import Delivery
from plugins.sdk import on_post_event
from publishing import posts
from publishing.models import PublishEvent
from publishing.public_events import OUTBOX_KINDS
from tests.publishing.conftest import make_post

registry = JobRegistry()


@on_post_event("published", "deleted", plugin="demo", registry=registry)
def live_watch(event, ctx):
    pass


@on_post_event("failed", plugin="demo", registry=registry)
def failure_watch(event, ctx):
    pass


SUBSCRIBERS = [live_watch.job, failure_watch.job]


@pytest.mark.parametrize(
    ("kind", "data", "subscribers"),
    [
        ("published", {}, ["demo.live_watch"]),
        ("failed", {}, ["demo.failure_watch"]),
        ("unpublished", {}, []),
        ("scheduled", {}, []),
        ("deleted", {"was": "published", "post": 5}, ["demo.live_watch"]),
        ("deleted", {"was": "draft", "post": 5}, []),
    ],
    ids=["published", "failed", "nobody-wants", "not-news", "deleted-live", "deleted-draft"],
)
def test_plan_deliveries(kind, data, subscribers):
    planned = plan_deliveries([Undispatched(1, kind, None, data)], targets(SUBSCRIBERS))
    assert [p.subscriber for p in planned] == subscribers


def test_every_outbox_kind_is_a_kind_of_publish_event():
    assert set(OUTBOX_KINDS) <= set(PublishEvent.Kind.values)


def _dispatch():
    with transaction.atomic():
        return dispatch(targets(SUBSCRIBERS), now=database_now(), limit=100)


@pytest.mark.django_db
def test_a_publish_is_dispatched_once_and_its_deleted_post_keeps_its_id():
    editor = User.objects.create_superuser("ed")
    post = make_post(status="draft")
    posts.publish_now(post=post, user=editor)
    done = _dispatch()
    assert (done.events, done.deliveries) == (1, 1)
    assert _dispatch().events == 0  # marked: never dispatched twice

    post.refresh_from_db()
    posts.delete_post(post=post, user=editor)
    _dispatch()
    rows = list(Delivery.objects.order_by("event_id").values_list("kind", "post_id", "subscriber"))
    assert rows == [
        ("published", post.pk, "demo.live_watch"),
        ("deleted", post.pk, "demo.live_watch"),
    ]


@pytest.mark.django_db
def test_an_event_committed_after_later_ones_were_dispatched_is_still_found():
    post = make_post(status="published")
    early = PublishEvent.objects.create(post=post, kind="published")
    late = PublishEvent.objects.create(post=post, kind="published")
    # The later id was dispatched first (its transaction committed first).
    PublishEvent.objects.filter(pk=late.pk).update(dispatched_at=database_now())
    assert _dispatch().events == 1
    assert list(Delivery.objects.values_list("event_id", flat=True)) == [early.pk]


@pytest.mark.django_db
def test_a_rolled_back_change_writes_no_event_and_so_no_delivery():
    post = make_post(status="draft")
    with pytest.raises(RuntimeError), transaction.atomic():
        posts.publish_now(post=post, user=User.objects.create_superuser("ed"))
        raise RuntimeError("the editor's request failed after the change")
    assert _dispatch().events == 0
    assert not Delivery.objects.exists()


@pytest.mark.django_db
def test_events_of_a_later_run_go_to_the_subscribers_declared_then():
    post = make_post(status="published")
    PublishEvent.objects.create(post=post, kind="unpublished")
    assert _dispatch().deliveries == 0
    assert PublishEvent.objects.filter(dispatched_at__isnull=True).count() == 0
    assert database_now() - PublishEvent.objects.get().dispatched_at < timedelta(minutes=1)


def test_subscribing_to_an_event_that_does_not_exist_says_which_exist():
    from plugins.sdk import JobDeclarationError

    with pytest.raises(JobDeclarationError, match=r"'went_live' is not an event.*published"):

        @on_post_event("went_live", plugin="demo", registry=JobRegistry())
        def typo(event, ctx):
            pass
