"""Late posts: each scheduled post still not live past ``INSTATIC_LATE_ALERT_AFTER`` is told
once, as a ``late`` event, by a run that looks only at the posts that crossed since the last."""

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from coordination.clock import database_now
from coordination.models import JobRun
from coordination.registry import registry
from coordination.wording import local_time
from publishing import late
from publishing.history import describe
from publishing.job_names import LATE_JOB
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import due_post, future_post, make_post, run_job

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
FIVE_MIN = timedelta(minutes=5)
pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("last_look", "now", "expected"),
    [
        # The first run: every overdue post, once.
        (None, T0, (None, T0 - FIVE_MIN)),
        # Then only what crossed since the last look, a margin before it.
        (T0 - timedelta(minutes=1), T0, (T0 - FIVE_MIN - timedelta(minutes=2), T0 - FIVE_MIN)),
        # After a day down, the day that crossed meanwhile.
        (T0 - timedelta(days=1), T0, (T0 - timedelta(days=1, minutes=6), T0 - FIVE_MIN)),
        # A last look "after" now (clocks apart) never makes the range empty backwards.
        (T0 + timedelta(minutes=10), T0, (T0 - FIVE_MIN, T0 - FIVE_MIN)),
    ],
)
def test_the_window_reaches_from_the_last_look_to_what_is_late_now(last_look, now, expected):
    assert late.window(last_look, now, FIVE_MIN) == expected


def test_the_late_job_is_a_transactional_publishing_job_run_when_due():
    job = registry.get(LATE_JOB)
    assert job.group == "publishing" and job.transactional
    assert job.schedule.fallback == timedelta(seconds=60)


def test_a_post_late_past_the_threshold_is_told_once_with_its_due_time():
    late_post = due_post(seconds_ago=600)
    due_post(seconds_ago=60)  # late, but not past five minutes yet
    make_post(status=Post.Status.PUBLISHED, publish_at=database_now() - timedelta(hours=1))
    due_post(seconds_ago=900, last_error="the body is too long")  # failed: told as failed
    run_job(LATE_JOB, node="node-l")
    event = PublishEvent.objects.get(kind=PublishEvent.Kind.LATE)
    assert event.post_id == late_post.pk and event.node == "node-l"
    assert event.data == {
        "was_due_at": late_post.publish_at.astimezone(UTC).isoformat(),
        "late_after": 300.0,
        "version": late_post.version,
    }
    assert event.dispatched_at is None, "undispatched: the outbox hands it on"
    assert event.lateness >= 600
    run_job(LATE_JOB)
    assert PublishEvent.objects.filter(kind=PublishEvent.Kind.LATE).count() == 1


def test_the_event_says_when_the_post_was_due_in_the_viewers_zone():
    post = due_post(seconds_ago=600)
    run_job(LATE_JOB)
    event = PublishEvent.objects.get(kind=PublishEvent.Kind.LATE)
    with timezone.override("Europe/Paris"):
        text = describe(event)
        due = local_time(post.publish_at)
    assert due.endswith(("CET", "CEST"))
    assert text == f"was due at {due}, still not live 5 min later"


def test_a_post_rescheduled_since_it_was_told_is_told_again_when_late_again():
    post = due_post(seconds_ago=600)
    run_job(LATE_JOB)
    rescheduled = database_now() + timedelta(minutes=10)
    Post.objects.filter(pk=post.pk).update(publish_at=rescheduled)
    assert late.record_late_posts(now=rescheduled + timedelta(minutes=6), node="n") == 1
    assert PublishEvent.objects.filter(post=post, kind=PublishEvent.Kind.LATE).count() == 2


def test_a_run_looks_only_at_posts_that_crossed_since_the_last_run_that_succeeded():
    now = database_now()
    long_late = due_post(seconds_ago=3600)  # crossed before the last look: not read again
    crossed = due_post(seconds_ago=400)
    JobRun.objects.create(
        job=LATE_JOB,
        slot=now - timedelta(minutes=2),
        status=JobRun.Status.SUCCEEDED,
        started_at=now - timedelta(minutes=2),
    )
    JobRun.objects.create(
        job=LATE_JOB,
        slot=now - timedelta(minutes=1),
        status=JobRun.Status.FAILED,
        started_at=now - timedelta(minutes=1),
    )
    run_job(LATE_JOB)
    told = set(
        PublishEvent.objects.filter(kind=PublishEvent.Kind.LATE).values_list("post", flat=True)
    )
    assert told == {crossed.pk}, "the window starts at the last run that succeeded"
    assert long_late.pk not in told


@override_settings(INSTATIC_LATE_ALERT_AFTER=60)
def test_the_job_returns_when_the_next_post_becomes_late():
    soon = future_post(seconds_ahead=120)
    future_post(seconds_ahead=3600)
    assert run_job(LATE_JOB) == soon.publish_at + timedelta(seconds=60)
    Post.objects.all().delete()
    assert run_job(LATE_JOB) is None


def test_a_run_tells_every_late_post_of_its_window_however_many():
    """None is left for a later run, whose window would start above them."""
    for minutes in range(10, 40):
        due_post(seconds_ago=minutes * 60)
    run_job(LATE_JOB)
    assert PublishEvent.objects.filter(kind=PublishEvent.Kind.LATE).count() == 30
