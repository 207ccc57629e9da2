"""A takedown sets the post's pending revisions aside, so a later re-publish is never undone.

An editor schedules a revision of a live post, the post is taken down (by hand, by its
unpublish time through the publish job, or deleted), the body is fixed while it is down and
the post goes live again: when the old revision's time comes, the publish job must not switch
it in over the fix. Every takedown path supersedes the post's pending revisions in its own
transaction, with a "Revision superseded" event saying why. Run on SQLite, PostgreSQL and
MariaDB (the publish job's unpublish batch is set-based SQL that differs per vendor).
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from coordination.clock import database_now
from publishing import batches, history, posts, revisions
from publishing.models import Post, PostRevision, PublishEvent
from tests.publishing.conftest import live_post, make_due, run_publish_job

pytestmark = pytest.mark.django_db

S = Post.Status
R = PostRevision.Status
K = PublishEvent.Kind


def soon(seconds: float = 3600):
    return database_now() + timedelta(seconds=seconds)


def planned_revision(post: Post, editor) -> PostRevision:
    return revisions.schedule_revision(
        post=post,
        title="Old plan",
        body="The plan written before the takedown.",
        user=editor,
        publish_at=soon(),
    )


def fix_and_publish_again(post: Post, editor) -> Post:
    """Fix the body of a post that is down (clearing a passed unpublish time), put it live."""
    post.refresh_from_db()
    post.body = "The fixed body."
    post.unpublish_at = None
    posts.save_post(post=post, user=editor, expected_version=post.version)
    return posts.publish_now(post=post, user=editor)


def assert_fix_survives_the_old_revisions_time(post: Post, revision: PostRevision) -> None:
    make_due(revision)
    run_publish_job(node="node-later")
    post.refresh_from_db()
    assert (post.status, post.body) == (S.PUBLISHED, "The fixed body.")
    assert not post.events.filter(kind=K.REVISION_PUBLISHED).exists()


def test_unpublishing_by_hand_supersedes_the_pending_revision(editor):
    post = live_post(title="Live")
    revision = planned_revision(post, editor)
    posts.unpublish_now(post=post, user=editor)

    revision.refresh_from_db()
    assert revision.status == R.SUPERSEDED
    assert revision.note == "the post was unpublished before the revision went live"
    assert revision.closed_by == "editor"
    event = post.events.get(kind=K.REVISION_SUPERSEDED)
    assert event.user == editor
    assert event.data == {"revision": 2, "revision_status": "scheduled", "note": revision.note}
    assert history.describe(event) == (
        "revision 2 (scheduled): the post was unpublished before the revision went live"
    )

    fix_and_publish_again(post, editor)
    assert_fix_survives_the_old_revisions_time(post, revision)


def test_the_publish_job_taking_a_post_down_at_its_time_supersedes_its_revision(editor):
    post = live_post(title="Live", unpublish_at=soon(7200))
    revision = planned_revision(post, editor)
    draft = PostRevision.objects.create(post=post, number=3, title="Draft", body="d")
    Post.objects.filter(pk=post.pk).update(unpublish_at=database_now() - timedelta(seconds=2))

    run_publish_job(node="node-down")
    post.refresh_from_db()
    assert post.status == S.UNPUBLISHED
    for pending in (revision, draft):
        pending.refresh_from_db()
        assert pending.status == R.SUPERSEDED
        assert pending.note == "the post was taken down at its unpublish time"
        assert pending.closed_by == "Scheduler (node node-down)"
        assert pending.closed_at == post.updated_at
    events = post.events.filter(kind=K.REVISION_SUPERSEDED).order_by("data__revision")
    assert [(e.node, e.user, e.data) for e in events] == [
        (
            "node-down",
            None,
            {"revision": n, "revision_status": status, "note": revision.note},
        )
        for n, status in ((2, "scheduled"), (3, "draft"))
    ]
    assert {e.at for e in events} == {post.events.get(kind=K.UNPUBLISHED).at}

    fix_and_publish_again(post, editor)
    assert_fix_survives_the_old_revisions_time(post, revision)


def test_the_unpublish_batch_leaves_other_posts_revisions_alone(editor):
    staying = live_post(title="Staying")
    kept = planned_revision(staying, editor)
    closed_before = PostRevision.objects.get(post=staying, number=1)
    going = live_post(title="Going", unpublish_at=soon(7200))
    planned_revision(going, editor)
    Post.objects.filter(pk=going.pk).update(unpublish_at=database_now() - timedelta(seconds=2))

    result = batches.unpublish_due(node="node-b")
    assert result.done == [going.pk]
    assert PostRevision.objects.get(pk=kept.pk).status == R.SCHEDULED
    assert PostRevision.objects.get(pk=closed_before.pk).status == R.PUBLISHED
    assert PostRevision.objects.get(post=going, number=1).status == R.PUBLISHED, "history stays"
    assert not staying.events.filter(kind=K.REVISION_SUPERSEDED).exists()
    assert going.events.filter(kind=K.REVISION_SUPERSEDED).count() == 1


@pytest.mark.postgresql
def test_on_postgresql_the_unpublish_batch_and_its_revisions_are_one_statement(editor):
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement form is PostgreSQL's")
    going = live_post(unpublish_at=soon(7200))
    planned_revision(going, editor)
    Post.objects.filter(pk=going.pk).update(unpublish_at=database_now() - timedelta(seconds=2))
    with CaptureQueriesContext(connection) as captured:
        result = batches.unpublish_due(node="node-b")
    assert result.done == [going.pk]
    writes = [
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].lstrip().upper().startswith(("UPDATE", "INSERT", "WITH", "DELETE"))
    ]
    assert len(writes) == 1, writes
    assert going.events.filter(kind=K.REVISION_SUPERSEDED).count() == 1


def test_deleting_a_post_records_its_pending_revision_as_superseded(admin_user, editor):
    post = live_post(title="Going away")
    planned_revision(post, editor)
    posts.delete_post(post=post, user=admin_user)

    event = PublishEvent.objects.get(kind=K.REVISION_SUPERSEDED)
    assert (event.post, event.post_title, event.user) == (None, "Going away", admin_user)
    assert event.data == {
        "revision": 2,
        "revision_status": "scheduled",
        "note": "the post was deleted",
    }
    assert not PostRevision.objects.exists(), "a deleted post's revisions go with it"
    run_publish_job()
    assert not PublishEvent.objects.filter(kind=K.REVISION_PUBLISHED).exists()


def test_a_post_without_pending_revisions_is_taken_down_without_revision_events(editor):
    post = live_post()
    posts.unpublish_now(post=post, user=editor)
    assert not post.events.filter(kind=K.REVISION_SUPERSEDED).exists()
