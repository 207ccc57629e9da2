"""Subscribers' deliveries: typed events, exactly once in the run's transaction, retries,
order per post, giving up with an alert, claim-first attempts whose run died."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import transaction

from coordination.clock import database_now
from coordination.models import Alert, JobRun, JobState
from coordination.registry import JobRegistry
from coordination.registry import registry as default_registry
from outbox import delivering, yielding
from outbox.models import Delivery
from plugins.sdk import on_post_event
from plugins.testing import context_for, deliver_events, make_due, run_tick
from publishing.models import PublishEvent
from tests.publishing.conftest import make_post

registry = JobRegistry()
seen = []
broken_posts = set()


@on_post_event("published", "unpublished", plugin="demo", transactional=True, registry=registry)
def index_post(event, ctx):
    """Writes a row per event: in the transaction that records the delivery."""
    Group.objects.create(name=f"seen-{event.id}")
    seen.append((event.kind, event.post_id, event.by))
    if event.post_id in broken_posts:
        raise ValueError(f"post {event.post_id} cannot be indexed")


@on_post_event("published", plugin="demo", retries=0, registry=registry)
def ping(event, ctx):
    seen.append(("ping", event.post_id, event.delivery_id))
    raise ConnectionError("the receiver is down")


@pytest.fixture(autouse=True)
def _clean():
    seen.clear()
    broken_posts.clear()


def publish_event(post, kind="published", node="node-a"):
    return PublishEvent.objects.create(post=post, kind=kind, node=node)


@pytest.mark.django_db
def test_a_transactional_subscriber_gets_the_typed_event_once():
    post = make_post(status="published")
    event = publish_event(post)

    assert deliver_events(index_post) == 1
    assert seen == [("published", post.pk, "node-a")]
    assert Group.objects.filter(name=f"seen-{event.pk}").exists()
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("succeeded", 1)

    assert deliver_events(index_post) == 0  # nothing twice
    assert len(seen) == 1


@pytest.mark.django_db
def test_a_failed_event_undoes_only_its_writes_and_holds_back_only_its_post():
    broken, fine = make_post(status="published"), make_post(status="published")
    broken_posts.add(broken.pk)
    first = publish_event(broken)
    publish_event(broken, kind="unpublished")
    other = publish_event(fine)

    assert deliver_events(index_post) == 1
    assert not Group.objects.filter(name=f"seen-{first.pk}").exists()  # rolled back
    assert Group.objects.filter(name=f"seen-{other.pk}").exists()
    failed = Delivery.objects.get(event=first)
    assert (failed.status, failed.attempts) == ("pending", 1)
    assert "cannot be indexed" in failed.last_error
    assert failed.due_at >= database_now() + timedelta(seconds=25)  # the back-off
    held = Delivery.objects.get(event__kind="unpublished")
    assert (held.status, held.attempts) == ("pending", 0)  # in order: behind the failure

    broken_posts.clear()
    Delivery.objects.filter(pk=failed.pk).update(due_at=database_now())
    assert deliver_events(index_post) == 2
    assert [kind for kind, *_ in seen[-2:]] == ["published", "unpublished"]


@pytest.mark.django_db
def test_a_subscriber_out_of_retries_gives_up_with_an_alert_and_keeps_its_delivery_id():
    publish_event(make_post(status="published"))

    deliver_events(ping)

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    assert delivery.finished_at is not None
    assert seen == [("ping", delivery.post_id, str(delivery.delivery_id))]
    assert Alert.objects.filter(kind=Alert.Kind.JOB_FAILING, subject="demo.ping").exists()


@pytest.mark.django_db
def test_a_claim_first_attempt_whose_run_died_counts_as_failed_and_is_retried():
    publish_event(make_post(status="published"))
    with transaction.atomic():
        from outbox.dispatch import dispatch, targets

        dispatch(targets([ping.job]), now=database_now(), limit=10)
    run = JobRun.objects.create(
        job="demo.ping", slot=database_now(), status=JobRun.Status.ABANDONED, node="gone"
    )
    Delivery.objects.update(status="running", run=run, attempts=1)
    job = registry.get("demo.ping")
    retrying = job.__class__(**{**job.__dict__, "options": job.options.__class__(retries=2)})

    again = delivering.deliver_pending(retrying.func, context_for(retrying))

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.run_id) == ("pending", 1, None)
    assert delivery.last_error == delivering.ATTEMPT_LOST
    assert again is not None and delivery.due_at > database_now()
    assert seen == []  # not delivered again in the run that found the attempt lost


@pytest.mark.django_db
def test_the_run_s_transaction_rolling_back_undoes_the_writes_and_the_record_together():
    event = publish_event(make_post(status="published"))
    with transaction.atomic():
        from outbox.dispatch import dispatch, targets

        dispatch(targets([index_post.job]), now=database_now(), limit=10)

    with pytest.raises(KeyboardInterrupt), transaction.atomic():
        delivering.deliver_pending(index_post.job.func, context_for(index_post))
        raise KeyboardInterrupt("the node died before the run committed")

    assert not Group.objects.filter(name=f"seen-{event.pk}").exists()
    assert Delivery.objects.get().status == "pending"
    assert deliver_events(index_post) == 1
    assert Group.objects.filter(name=f"seen-{event.pk}").count() == 1


@pytest.mark.django_db(transaction=True)
def test_scheduler_ticks_dispatch_and_deliver_with_ledger_rows(monkeypatch):
    post = make_post(status="published")
    publish_event(post)
    monkeypatch.setattr("outbox.jobs.subscriber_jobs", lambda: [index_post.job])
    dispatcher = default_registry.get("outbox.dispatch")
    make_due(dispatcher)
    run_tick(dispatcher)
    make_due(index_post)
    run_tick(index_post)

    assert seen == [("published", post.pk, "node-a")]
    runs = dict(JobRun.objects.values_list("job", "status"))
    assert runs == {"outbox.dispatch": "succeeded", "demo.index_post": "succeeded"}
    assert Delivery.objects.get().status == "succeeded"


@pytest.mark.django_db
def test_a_claim_first_post_held_behind_a_failure_is_released_not_counted_as_attempted():
    post = make_post(status="published")
    publish_event(post)
    publish_event(post)

    deliver_events(ping)

    rows = list(Delivery.objects.order_by("event_id").values_list("status", "attempts", "run"))
    assert rows == [("failed", 1, None), ("pending", 0, None)]


@pytest.mark.django_db
def test_a_subscriber_steps_aside_while_posts_are_going_out_and_delivers_after():
    post = make_post(status="published")
    publish_event(post)
    going_out = JobRun.objects.create(
        job="publishing.publish_due", slot=database_now(), status=JobRun.Status.RUNNING
    )
    JobState.objects.create(name="publishing.publish_due", group="publishing")

    assert deliver_events(index_post) == 0
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 0)  # waiting, not lost
    assert seen == []

    going_out.status = JobRun.Status.SUCCEEDED
    going_out.save()
    assert deliver_events(index_post) == 1
    assert seen == [("published", post.pk, "node-a")]


@on_post_event("published", plugin="demo", transactional=True, registry=registry)
def busy_midway(event, ctx):
    """Records the event; the second one's delivery finds posts falling due."""
    seen.append(("busy", event.post_id))
    if len(seen) == 2:
        publishing_falls_due()


@on_post_event("published", plugin="demo", registry=registry)
def busy_midway_claim_first(event, ctx):
    """The same, claim first."""
    seen.append(("busy", event.post_id))
    if len(seen) == 2:
        publishing_falls_due()


def publishing_falls_due() -> None:
    JobState.objects.update_or_create(
        name="publishing.publish_due",
        defaults={"group": "publishing", "wake_at": database_now()},
    )


@pytest.mark.django_db
@pytest.mark.parametrize("subscriber", [busy_midway, busy_midway_claim_first])
def test_a_batch_under_way_steps_aside_once_posts_fall_due_and_keeps_what_it_delivered(
    subscriber, monkeypatch
):
    monkeypatch.setattr(yielding, "LOOK_EVERY", 0.0)  # look between every two deliveries
    posts = [make_post(status="published") for _ in range(5)]
    for post in posts:
        publish_event(post)

    assert deliver_events(subscriber) == 2
    assert seen == [("busy", post.pk) for post in posts[:2]]
    rows = list(Delivery.objects.order_by("event_id").values_list("status", "attempts"))
    assert rows == [("succeeded", 1)] * 2 + [("pending", 0)] * 3  # waiting, not lost

    JobState.objects.filter(name="publishing.publish_due").update(wake_at=None)
    assert deliver_events(subscriber) == 3
    assert seen == [("busy", post.pk) for post in posts]
