"""The editor actions on a post (publishing.posts): events, wake-ups, refusals, permissions."""

from datetime import UTC, timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction

from coordination.clock import database_now
from publishing import batches, posts
from publishing.exceptions import InvalidSchedule, InvalidTransition, NotPublishable
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import due_post, future_post, kinds, make_post, publish_job_state

pytestmark = pytest.mark.django_db

S = Post.Status
K = PublishEvent.Kind


# --- the model's database constraints ---------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {"status": S.SCHEDULED, "publish_at": None},
        {"status": S.PUBLISHED, "published_at": None},
        {"status": "bogus"},
        {"unpublish_at_offset": -60},
        {"unpublish_at_offset": 0},
    ],
)
def test_database_rejects_inconsistent_posts(values):
    now = database_now()
    values = dict(values)
    offset = values.pop("unpublish_at_offset", None)
    if offset is not None:
        values.update(publish_at=now, unpublish_at=now + timedelta(seconds=offset))
    with pytest.raises(IntegrityError), transaction.atomic():
        Post.objects.create(title="t", slug="t", body="b", **values)


def test_times_are_set_by_the_database_clock():
    before = database_now()
    post = posts.save_post(post=Post(title="Hello", slug="hello", body="Hi"), user=None)
    after = database_now()
    assert before <= post.created_at <= after
    assert before <= post.updated_at <= after
    assert post.status == S.DRAFT


# --- editor actions ---------------------------------------------------------------------


def test_schedule_records_event_and_requests_wakeup(editor):
    state = publish_job_state()
    post = make_post(author=editor)
    publish_at = database_now() + timedelta(minutes=5)
    posts.schedule_post(post=post, publish_at=publish_at, user=editor)
    post.refresh_from_db()
    assert post.status == S.SCHEDULED
    assert post.publish_at == publish_at
    event = post.events.get()
    assert (event.kind, event.user, event.actor) == (K.SCHEDULED, editor, "editor")
    state.refresh_from_db()
    assert state.wake_at == publish_at, "the scheduler must wake up for the new post"


def test_schedule_refuses_past_or_missing_times(editor):
    post = make_post()
    now = database_now()
    with pytest.raises(InvalidSchedule) as exc:
        posts.schedule_post(post=post, publish_at=now - timedelta(seconds=1), user=editor)
    assert "must be in the future" in exc.value.errors["publish_at"]
    with pytest.raises(InvalidSchedule) as exc:
        posts.schedule_post(
            post=post,
            publish_at=now + timedelta(hours=2),
            unpublish_at=now + timedelta(hours=1),
            user=editor,
        )
    assert exc.value.errors == {
        "unpublish_at": "The unpublish time must be after the publish time."
    }
    post.refresh_from_db()
    assert post.status == S.DRAFT
    assert not post.events.exists()


def test_schedule_refuses_content_that_cannot_be_published(editor):
    post = make_post(title="   ")
    with pytest.raises(NotPublishable, match="the title is empty"):
        posts.schedule_post(post=post, publish_at=database_now() + timedelta(hours=1), user=editor)


def test_reschedule_moves_the_time_and_wakes_the_scheduler(editor):
    state = publish_job_state()
    post = future_post(seconds_ahead=3600)
    old = post.publish_at
    new = database_now() + timedelta(seconds=30)
    posts.reschedule_post(post=post, publish_at=new, user=editor)
    post.refresh_from_db()
    assert post.publish_at == new
    event = post.events.get()
    assert event.kind == K.RESCHEDULED
    assert event.data == {
        "previous_publish_at": old.astimezone(UTC).isoformat(),
        "publish_at": new.astimezone(UTC).isoformat(),
    }
    state.refresh_from_db()
    assert state.wake_at == new


def test_cancel_takes_a_scheduled_post_back_to_draft(editor):
    post = future_post()
    posts.cancel_schedule(post=post, user=editor)
    post.refresh_from_db()
    assert post.status == S.DRAFT
    assert kinds(post) == [K.CANCELLED]


def test_cancel_after_the_publish_says_so(editor):
    post = due_post()
    batches.publish_due(node="n1")
    with pytest.raises(InvalidTransition, match="already published"):
        posts.cancel_schedule(post=post, user=editor)
    post.refresh_from_db()
    assert post.status == S.PUBLISHED


def test_publish_now_and_unpublish_now(editor):
    post = make_post()
    before = database_now()
    posts.publish_now(post=post, user=editor)
    post.refresh_from_db()
    assert post.status == S.PUBLISHED
    assert before <= post.published_at <= database_now()
    with pytest.raises(InvalidTransition):
        posts.publish_now(post=post, user=editor)
    posts.unpublish_now(post=post, user=editor)
    post.refresh_from_db()
    assert post.status == S.UNPUBLISHED
    assert kinds(post) == [K.PUBLISHED, K.UNPUBLISHED]
    with pytest.raises(InvalidTransition):
        posts.unpublish_now(post=post, user=editor)


def test_publish_now_refuses_a_passed_unpublish_time(editor):
    now = database_now()
    post = make_post(publish_at=now - timedelta(hours=2), unpublish_at=now - timedelta(hours=1))
    with pytest.raises(InvalidSchedule, match="unpublish time has passed"):
        posts.publish_now(post=post, user=editor)


def test_set_unpublish_at_on_a_live_post(editor):
    state = publish_job_state()
    post = make_post(status=S.PUBLISHED)
    when = database_now() + timedelta(minutes=10)
    posts.set_unpublish_at(post=post, unpublish_at=when, user=editor)
    post.refresh_from_db()
    assert post.unpublish_at == when
    state.refresh_from_db()
    assert state.wake_at == when


@pytest.mark.parametrize(
    "action",
    ["schedule", "reschedule", "cancel", "publish_now", "unpublish_now", "set_unpublish_at"],
)
def test_users_without_the_permission_cannot_schedule_or_publish(drafter, action):
    later = database_now() + timedelta(hours=1)
    calls = {
        "schedule": (
            make_post,
            lambda p: posts.schedule_post(post=p, publish_at=later, user=drafter),
        ),
        "reschedule": (
            future_post,
            lambda p: posts.reschedule_post(post=p, publish_at=later, user=drafter),
        ),
        "cancel": (future_post, lambda p: posts.cancel_schedule(post=p, user=drafter)),
        "publish_now": (make_post, lambda p: posts.publish_now(post=p, user=drafter)),
        "unpublish_now": (
            lambda: make_post(status=S.PUBLISHED),
            lambda p: posts.unpublish_now(post=p, user=drafter),
        ),
        "set_unpublish_at": (
            lambda: make_post(status=S.PUBLISHED),
            lambda p: posts.set_unpublish_at(post=p, unpublish_at=later, user=drafter),
        ),
    }
    create, call = calls[action]
    post = create()
    status = post.status
    with pytest.raises(PermissionDenied, match="Can schedule and publish posts"):
        call(post)
    post.refresh_from_db()
    assert post.status == status
    assert not post.events.exists()


def test_drafters_can_write_drafts_but_not_edit_scheduled_posts(drafter):
    post = posts.save_post(post=Post(title="Mine", slug="mine", body="draft"), user=drafter)
    assert post.author == drafter
    post.body = "better draft"
    posts.save_post(post=post, user=drafter)
    assert Post.objects.get(pk=post.pk).body == "better draft"
    scheduled = future_post()
    scheduled.body = "sneaky change"
    with pytest.raises(PermissionDenied):
        posts.save_post(post=scheduled, user=drafter)
    assert Post.objects.get(pk=scheduled.pk).body != "sneaky change"


def test_saving_content_never_undoes_a_publish(editor):
    """A stale form instance (loaded while scheduled) saved after the publish keeps it live."""
    post = due_post()
    stale = Post.objects.get(pk=post.pk)
    batches.publish_due(node="n1")
    stale.title = "Edited title"
    posts.save_post(post=stale, user=editor)
    post.refresh_from_db()
    assert post.status == S.PUBLISHED
    assert post.title == "Edited title"
    assert post.published_at is not None
