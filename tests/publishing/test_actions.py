"""Every editor action makes its change the one way (publishing.actions): under the row lock,
one version more, the editor recorded, its event written, the publish job woken when the change
brings work sooner, and ``updated_at`` (the public pages' Last-Modified) moved only by changes
the public sees."""

from datetime import timedelta

import pytest

from coordination.clock import database_now
from publishing import posts, previews, revisions
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import future_post, live_post, make_post, publish_job_state

pytestmark = pytest.mark.django_db

K = PublishEvent.Kind
SOON = timedelta(minutes=5)


def _revision(post, user, at):
    return revisions.schedule_revision(
        post=post, title="New", body="New text.", publish_at=at, user=user
    )


# name: (the post it starts from, the action given the post, editor and a time soon,
#        the event it writes, whether the public sees it, whether it wakes the job at that time)
ACTIONS = {
    "schedule": (
        make_post,
        lambda p, u, at: posts.schedule_post(post=p, publish_at=at, user=u),
        K.SCHEDULED,
        True,
        True,
    ),
    "reschedule": (
        future_post,
        lambda p, u, at: posts.reschedule_post(post=p, publish_at=at, user=u),
        K.RESCHEDULED,
        True,
        True,
    ),
    "cancel": (
        future_post,
        lambda p, u, at: posts.cancel_schedule(post=p, user=u),
        K.CANCELLED,
        True,
        False,
    ),
    "publish now": (
        make_post,
        lambda p, u, at: posts.publish_now(post=p, user=u),
        K.PUBLISHED,
        True,
        False,
    ),
    "unpublish now": (
        live_post,
        lambda p, u, at: posts.unpublish_now(post=p, user=u),
        K.UNPUBLISHED,
        True,
        False,
    ),
    "set unpublish time": (
        live_post,
        lambda p, u, at: posts.set_unpublish_at(post=p, unpublish_at=at, user=u),
        K.RESCHEDULED,
        True,
        True,
    ),
    "schedule a revision": (live_post, _revision, K.REVISION_SCHEDULED, False, True),
    "revoke preview links": (
        make_post,
        lambda p, u, at: previews.revoke_preview_links(post=p, user=u),
        K.PREVIEWS_REVOKED,
        False,
        False,
    ),
}


@pytest.mark.parametrize("name", ACTIONS)
def test_an_editor_action_changes_the_post_the_one_way(name, editor):
    start, act, kind, public, wakes = ACTIONS[name]
    post = start()
    long_ago = database_now() - timedelta(days=3)
    Post.objects.filter(pk=post.pk).update(updated_at=long_ago)
    version = Post.objects.get(pk=post.pk).version
    state = publish_job_state()
    at = database_now() + SOON

    act(Post.objects.get(pk=post.pk), editor, at)

    after = Post.objects.get(pk=post.pk)
    assert after.version == version + 1
    assert after.updated_by == "editor"
    assert after.events.latest("id").kind == kind
    assert (after.updated_at != long_ago) == public
    state.refresh_from_db()
    assert state.wake_at == (at if wakes else None)
