"""Scheduled revisions of live posts: the services' contract and the publish job's switch.

A revision goes live exactly once, at its time by the database clock and never before, and
only while it is still scheduled and its post still live: a cancelled or superseded revision
never does. Run on SQLite, PostgreSQL and MariaDB (``DATABASE_URL``).
"""

from datetime import UTC, timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.test import override_settings

from coordination.clock import database_now
from coordination.models import JobState
from publishing import calendar, job_names, posts, rendering, revisions, selectors
from publishing.exceptions import (
    EditConflict,
    InvalidSchedule,
    InvalidTransition,
    NotPublishable,
)
from publishing.models import Post, PostRevision, PublishEvent
from tests.publishing.conftest import live_post, make_due, make_post, run_publish_job

pytestmark = pytest.mark.django_db

S = Post.Status
R = PostRevision.Status
K = PublishEvent.Kind


def soon(seconds: float = 3600):
    return database_now() + timedelta(seconds=seconds)


def schedule(post, editor, *, title="New title", body="The *new* body.", at=None, **kwargs):
    return revisions.schedule_revision(
        post=post, title=title, body=body, publish_at=at or soon(), user=editor, **kwargs
    )


def test_schedule_revision_returns_it_and_keeps_the_live_version_until_its_time(editor):
    post = live_post(title="Old title", body="The old body.")
    before = Post.objects.get(pk=post.pk)
    at = soon()
    revision = schedule(post, editor, at=at)

    assert isinstance(revision, PostRevision)
    assert (revision.status, revision.publish_at, revision.number) == (R.SCHEDULED, at, 2)
    assert (revision.title, revision.created_by) == ("New title", editor)
    assert revision.body_html == "<p>The <em>new</em> body.</p>\n", "rendered when saved"
    baseline = post.revisions.get(number=1)
    assert (baseline.status, baseline.title, baseline.body) == (
        R.PUBLISHED,
        "Old title",
        before.body,
    )
    post.refresh_from_db()
    assert (post.title, post.body) == ("Old title", "The old body."), "live version unchanged"
    assert post.version == before.version + 1, "a stale form of the post is refused"
    assert post.updated_at == before.updated_at, "the public pages' Last-Modified stays"
    assert post.updated_by == "editor"
    event = post.events.get(kind=K.REVISION_SCHEDULED)
    assert (event.user, event.data) == (
        editor,
        {"revision": 2, "publish_at": at.astimezone(UTC).isoformat()},
    )


def test_scheduling_wakes_the_publish_job_at_the_revisions_time(editor):
    JobState.objects.create(name=job_names.PUBLISH_JOB, group="publishing")
    at = soon(120)
    schedule(live_post(), editor, at=at)
    assert JobState.objects.get(name=job_names.PUBLISH_JOB).wake_at == at
    assert run_publish_job() == at, "the publish job's next run"


def test_scheduling_needs_the_publish_permission(drafter):
    post = live_post()
    with pytest.raises(PermissionDenied, match="publishing.publish_post"):
        schedule(post, drafter)
    assert not PostRevision.objects.exists()


@pytest.mark.parametrize("status", [S.DRAFT, S.SCHEDULED, S.UNPUBLISHED])
def test_only_live_posts_take_revisions(editor, status):
    values = {"publish_at": soon()} if status == S.SCHEDULED else {}
    post = make_post(status=status, **values)
    with pytest.raises(InvalidTransition, match="not live; edit the post itself"):
        schedule(post, editor)


def test_bad_times_and_bodies_are_refused_with_a_reason(editor):
    post = live_post(unpublish_at=soon(600))
    with pytest.raises(InvalidSchedule, match="must be in the future"):
        schedule(post, editor, at=database_now() - timedelta(seconds=1))
    with pytest.raises(InvalidSchedule, match="after the post is taken down"):
        schedule(post, editor, at=soon(900))
    with pytest.raises(ValueError, match="aware datetime"):
        schedule(post, editor, at=soon().replace(tzinfo=None))
    with pytest.raises(NotPublishable, match="the body is empty"):
        schedule(post, editor, body="   ", at=soon(60))
    with pytest.raises(NotPublishable, match="the title is empty"):
        schedule(post, editor, title="", at=soon(60))
    assert not PostRevision.objects.exists()
    assert Post.objects.get(pk=post.pk).version == post.version


def test_a_stale_version_is_refused_and_nothing_is_written(editor):
    post = live_post()
    opened = post.version
    schedule(post, editor)  # a colleague, meanwhile
    with pytest.raises(EditConflict, match="was changed by editor"):
        schedule(post, editor, title="Mine", expected_version=opened)
    revision = post.revisions.get(status=R.SCHEDULED)
    with pytest.raises(EditConflict):
        revisions.cancel_revision(revision=revision, user=editor, expected_version=opened)
    assert post.revisions.get(status=R.SCHEDULED).title == "New title"


def test_the_job_switches_a_due_revision_exactly_once(editor):
    post = live_post(title="Old", body="Old body.")
    revision = make_due(schedule(post, editor, title="New", body="**New** body."))
    version = Post.objects.get(pk=post.pk).version

    run_publish_job(node="node-r")
    post.refresh_from_db()
    revision.refresh_from_db()
    assert (post.title, post.body) == ("New", "**New** body.")
    assert post.body_html == "<p><strong>New</strong> body.</p>\n"
    assert post.excerpt == "New body."
    assert post.version == version + 1
    assert post.updated_by == "Scheduler (node node-r)"
    assert post.status == S.PUBLISHED
    assert revision.status == R.PUBLISHED
    assert revision.published_at >= revision.publish_at, "never early"
    assert revision.closed_by == "Scheduler (node node-r)"
    event = post.events.get(kind=K.REVISION_PUBLISHED)
    assert (event.node, event.data) == ("node-r", {"revision": 2})
    assert event.get_kind_display() == "Revision published"
    assert event.lateness >= 5

    run_publish_job(node="node-s")
    assert post.events.filter(kind=K.REVISION_PUBLISHED).count() == 1, "not switched twice"
    assert Post.objects.get(pk=post.pk).version == version + 1


def test_the_public_page_shows_the_revision_only_after_the_switch(client, editor):
    post = live_post(title="Before", slug="switching", body="Before body.")
    revision = schedule(post, editor, title="After", body="After body.")
    assert "Before body." in client.get("/posts/switching/").content.decode()
    make_due(revision)
    run_publish_job()
    page = client.get("/posts/switching/").content.decode()
    assert "After body." in page and "Before body." not in page


def test_a_revision_is_never_switched_early(editor):
    post = live_post(title="Old")
    revision = schedule(post, editor, at=soon(30))
    assert run_publish_job() == revision.publish_at, "the job sleeps until the revision's time"
    assert Post.objects.get(pk=post.pk).title == "Old"
    assert PostRevision.objects.get(pk=revision.pk).status == R.SCHEDULED


def test_the_switch_copies_stored_html_and_renders_nothing(editor, monkeypatch):
    post = live_post()
    make_due(schedule(post, editor, body="# Heading"))

    def no_rendering(*args, **kwargs):
        raise AssertionError("the switch must not render Markdown")

    monkeypatch.setattr(rendering, "render", no_rendering)
    monkeypatch.setattr(revisions, "render", no_rendering)
    run_publish_job()
    assert Post.objects.get(pk=post.pk).body_html == "<h1>Heading</h1>\n"


def test_a_cancelled_revision_never_goes_live(editor):
    post = live_post(title="Old")
    revision = schedule(post, editor)
    was_due = revision.publish_at
    revisions.cancel_revision(revision=revision, user=editor)
    make_due(revision)
    assert revision.status == R.CANCELLED
    run_publish_job()
    assert Post.objects.get(pk=post.pk).title == "Old"
    assert not post.events.filter(kind=K.REVISION_PUBLISHED).exists()
    cancelled = post.events.get(kind=K.REVISION_CANCELLED)
    assert cancelled.user == editor
    assert cancelled.data == {
        "revision": 2,
        "revision_status": "scheduled",
        "was_due_at": was_due.astimezone(UTC).isoformat(),
    }


def test_cancelling_after_the_switch_says_it_went_live(editor):
    revision = make_due(schedule(live_post(), editor))
    run_publish_job()
    with pytest.raises(InvalidTransition, match="it went live at"):
        revisions.cancel_revision(revision=revision, user=editor)


def test_cancelling_needs_the_publish_permission(editor, drafter):
    revision = schedule(live_post(), editor)
    with pytest.raises(PermissionDenied):
        revisions.cancel_revision(revision=revision, user=drafter)
    assert PostRevision.objects.get(pk=revision.pk).status == R.SCHEDULED


def test_a_superseded_revision_never_goes_live(editor):
    post = live_post(title="Old")
    first = schedule(post, editor, title="First plan")
    second = schedule(post, editor, title="Second plan", at=soon(7200))
    first.refresh_from_db()
    assert first.status == R.SUPERSEDED
    assert first.note == "revision 3 was scheduled"
    make_due(first, seconds_ago=10)
    make_due(second, seconds_ago=5)
    run_publish_job()
    post.refresh_from_db()
    assert post.title == "Second plan"
    events = post.events.filter(kind=K.REVISION_PUBLISHED)
    assert [e.data for e in events] == [{"revision": 3}]
    assert post.events.filter(kind=K.REVISION_SUPERSEDED).count() == 1


def test_editing_the_live_post_directly_supersedes_the_scheduled_revision(editor):
    post = live_post(title="Old", body="Old body.")
    revision = schedule(post, editor, title="Planned")
    post.refresh_from_db()
    post.title = "Typo fixed"
    posts.save_post(post=post, user=editor, expected_version=post.version)
    revision.refresh_from_db()
    assert revision.status == R.SUPERSEDED
    assert "edited directly" in revision.note
    direct = post.revisions.get(number=3)
    assert (direct.status, direct.title, direct.created_by) == (R.PUBLISHED, "Typo fixed", editor)
    make_due(revision)
    run_publish_job()
    assert Post.objects.get(pk=post.pk).title == "Typo fixed"


def test_saving_a_live_post_without_changing_its_text_keeps_the_revision(editor):
    post = live_post()
    revision = schedule(post, editor)
    post.refresh_from_db()
    posts.save_post(post=post, user=editor, expected_version=post.version)
    assert PostRevision.objects.get(pk=revision.pk).status == R.SCHEDULED


def test_a_revision_of_a_post_not_live_at_its_time_is_superseded_by_the_job(editor):
    """Takedowns supersede revisions themselves; the job still never puts one on a post
    that is down (one written bypassing the services)."""
    post = live_post(title="Old")
    revision = schedule(post, editor)
    Post.objects.filter(pk=post.pk).update(status=S.UNPUBLISHED)
    make_due(revision)
    assert run_publish_job() is None, "nothing left due: no loop on it"
    revision.refresh_from_db()
    assert revision.status == R.SUPERSEDED
    assert "not live" in revision.note
    assert Post.objects.get(pk=post.pk).title == "Old"
    assert post.events.filter(kind=K.REVISION_SUPERSEDED, node="test-node").count() == 1


def test_of_two_due_revisions_of_one_post_only_the_newest_goes_live(editor):
    """The services never leave two scheduled; the job must still not switch a post twice."""
    post = live_post(title="Old")
    make_due(schedule(post, editor, title="Newest"), seconds_ago=1)
    PostRevision.objects.create(
        post=post,
        number=9,
        title="Older",
        body="b",
        status=R.SCHEDULED,
        publish_at=database_now() - timedelta(seconds=9),
    )
    run_publish_job()
    assert Post.objects.get(pk=post.pk).title == "Newest"
    assert PostRevision.objects.get(number=9).status == R.SUPERSEDED


@override_settings(INSTATIC_PUBLISH_BATCH_SIZE=2)
def test_a_full_batch_of_revisions_runs_again_at_once(editor):
    posts = [live_post() for _ in range(3)]
    for n, post in enumerate(posts):
        make_due(schedule(post, editor, title=f"Revised {n}"), seconds_ago=10 - n)
    assert run_publish_job() <= database_now(), "more is due now"
    assert run_publish_job() is None
    assert [p.title for p in Post.objects.filter(pk__in=[p.pk for p in posts]).order_by("pk")] == [
        "Revised 0",
        "Revised 1",
        "Revised 2",
    ]


def test_restore_makes_a_new_draft_revision_from_an_old_one(editor):
    post = live_post(title="Original", body="Original body.")
    make_due(schedule(post, editor, title="Rewrite", body="Rewritten."))
    run_publish_job()
    original = post.revisions.get(number=1)
    draft = revisions.restore_revision(revision=original, user=editor)
    assert (draft.number, draft.status, draft.title) == (3, R.DRAFT, "Original")
    assert draft.restored_from == original
    assert draft.body_html == "<p>Original body.</p>\n"
    assert Post.objects.get(pk=post.pk).title == "Rewrite", "a draft changes nothing live"
    assert selectors.pending_revision(post) == draft
    # Scheduling it (the admin prefills the form from the draft) supersedes the draft.
    revision = schedule(post, editor, title=draft.title, body=draft.body)
    assert PostRevision.objects.get(pk=draft.pk).status == R.SUPERSEDED
    make_due(revision)
    run_publish_job()
    assert Post.objects.get(pk=post.pk).title == "Original"
    assert [r.status for r in post.revisions.order_by("number")] == [
        R.PUBLISHED,
        R.PUBLISHED,
        R.SUPERSEDED,
        R.PUBLISHED,
    ]


def test_restore_needs_the_publish_permission_and_a_live_post(editor, drafter):
    post = live_post()
    schedule(post, editor)
    first = post.revisions.get(number=1)
    with pytest.raises(PermissionDenied):
        revisions.restore_revision(revision=first, user=drafter)
    posts.unpublish_now(post=post, user=editor)
    with pytest.raises(InvalidTransition):
        revisions.restore_revision(revision=first, user=editor)


def test_the_calendar_shows_scheduled_revisions_and_flags_late_ones(editor):
    post = live_post()
    revision = schedule(post, editor, title="Planned rewrite", at=soon(600))
    now = database_now()
    entries = calendar.revision_switches(now - timedelta(days=1), now + timedelta(days=1), now)
    assert [(e.kind, e.post_id, e.title, e.late) for e in entries] == [
        (calendar.Kind.REVISION, post.pk, "Planned rewrite", False)
    ]
    make_due(revision)
    now = database_now()
    [late] = calendar.revision_switches(now, now + timedelta(days=1), now)
    assert late.late, "due and not switched: late, and listed although before the window"
    revisions.cancel_revision(revision=revision, user=editor)
    assert calendar.revision_switches(now, now + timedelta(days=1), now) == []
