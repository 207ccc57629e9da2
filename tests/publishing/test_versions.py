"""Optimistic concurrency in the services: every write moves the version; stale edits are refused.

The admin passes the version its form was loaded with; the services compare it with the row's
version *under the row lock*, so two editors (or an editor and the publish job) can never
overwrite each other unseen, whichever check ran first.
"""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from django.utils import timezone
from django.utils.formats import date_format

from coordination.clock import database_now
from publishing import batches, posts
from publishing.exceptions import EditConflict
from publishing.models import Post
from tests.publishing.conftest import due_post, future_post, make_post

pytestmark = pytest.mark.django_db

S = Post.Status


def version(post: Post) -> int:
    return Post.objects.values_list("version", flat=True).get(pk=post.pk)


@pytest.fixture
def colleague(db) -> User:
    from django.contrib.auth.models import Permission

    user = User.objects.create_user("bob", "bob@example.com", "pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="publishing"))
    return User.objects.get(pk=user.pk)


# --- every write moves the version -------------------------------------------------------


def test_a_new_post_starts_at_version_one_and_each_content_save_adds_one(editor):
    post = posts.save_post(post=Post(title="T", slug="t", body="b"), user=editor)
    assert (post.version, post.updated_by) == (1, "editor")
    post.body = "c"
    post = posts.save_post(post=post, user=editor)
    assert post.version == 2


def test_every_editor_action_adds_one(editor):
    later = database_now() + timedelta(hours=1)
    post = make_post()
    steps = [
        lambda: posts.schedule_post(post=post, publish_at=later, user=editor),
        lambda: posts.reschedule_post(
            post=post, publish_at=later + timedelta(minutes=1), user=editor
        ),
        lambda: posts.cancel_schedule(post=post, user=editor),
        lambda: posts.publish_now(post=post, user=editor),
        lambda: posts.set_unpublish_at(
            post=post, unpublish_at=later + timedelta(hours=1), user=editor
        ),
        lambda: posts.unpublish_now(post=post, user=editor),
    ]
    for expected, step in enumerate(steps, start=2):
        step()
        assert version(post) == expected
        assert Post.objects.get(pk=post.pk).updated_by == "editor"


def test_the_publish_jobs_set_based_updates_add_one():
    published = due_post()
    failed = due_post(title="")
    batches.publish_due(node="node-a")
    assert (version(published), version(failed)) == (2, 2)
    assert Post.objects.get(pk=published.pk).updated_by == "Scheduler (node node-a)"
    Post.objects.filter(pk=published.pk).update(unpublish_at=database_now())
    batches.unpublish_due(node="node-b")
    assert version(published) == 3
    assert Post.objects.get(pk=published.pk).updated_by == "Scheduler (node node-b)"


# --- a stale version is refused and nothing is written ----------------------------------


def _later():
    return database_now() + timedelta(hours=2)


EDITS = {
    "save_post": (
        make_post,
        lambda p, u, v: posts.save_post(post=p, user=u, expected_version=v),
    ),
    "schedule_post": (
        make_post,
        lambda p, u, v: posts.schedule_post(
            post=p, publish_at=_later(), user=u, expected_version=v
        ),
    ),
    "reschedule_post": (
        future_post,
        lambda p, u, v: posts.reschedule_post(
            post=p, publish_at=_later(), user=u, expected_version=v
        ),
    ),
    "cancel_schedule": (
        future_post,
        lambda p, u, v: posts.cancel_schedule(post=p, user=u, expected_version=v),
    ),
    "publish_now": (
        make_post,
        lambda p, u, v: posts.publish_now(post=p, user=u, expected_version=v),
    ),
    "unpublish_now": (
        lambda: make_post(status=S.PUBLISHED),
        lambda p, u, v: posts.unpublish_now(post=p, user=u, expected_version=v),
    ),
    "set_unpublish_at": (
        lambda: make_post(status=S.PUBLISHED),
        lambda p, u, v: posts.set_unpublish_at(
            post=p, unpublish_at=_later(), user=u, expected_version=v
        ),
    ),
}


@pytest.mark.parametrize("action", list(EDITS))
def test_a_stale_version_is_refused_and_nothing_is_written(editor, colleague, action):
    create, call = EDITS[action]
    post = create()
    opened = post.version
    # A colleague changes the post after the editor opened it (content only: same status).
    Post.objects.filter(pk=post.pk).update(version=opened + 1, updated_by="bob")
    before = Post.objects.filter(pk=post.pk).values().get()
    stale = Post.objects.get(pk=post.pk)
    stale.title = "Typed by the editor"
    with pytest.raises(EditConflict, match="changed by bob at .* since you opened it"):
        call(stale, editor, opened)
    assert Post.objects.filter(pk=post.pk).values().get() == before
    assert not post.events.exists()


@pytest.mark.parametrize("action", list(EDITS))
def test_the_current_version_is_accepted(editor, action):
    create, call = EDITS[action]
    post = create()
    call(Post.objects.get(pk=post.pk), editor, post.version)
    assert version(post) == post.version + 1


def test_callers_that_pass_no_version_keep_working(editor):
    """Jobs, scripts and tests act on the current row, whatever its version."""
    post = make_post()
    Post.objects.filter(pk=post.pk).update(version=7)
    posts.publish_now(post=post, user=editor)
    assert version(post) == 8


@override_settings(TIME_ZONE="Asia/Tokyo")
def test_the_conflict_says_who_changed_it_when_in_the_editors_zone(editor, colleague):
    post = make_post(title="Shared")
    opened = post.version
    posts.publish_now(post=post, user=colleague)
    current = Post.objects.get(pk=post.pk)
    with pytest.raises(EditConflict) as caught:
        posts.unpublish_now(post=post, user=editor, expected_version=opened)
    when = date_format(timezone.localtime(current.updated_at), "Y-m-d H:i:s T")
    assert when.endswith("JST")
    assert str(caught.value) == (
        f"“Shared” was changed by bob at {when} since you opened it; it is now Published."
    )
    assert caught.value.version == current.version
    assert Post.objects.get(pk=post.pk).status == S.PUBLISHED
