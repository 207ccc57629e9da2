"""Releases: several changes of posts go live together at one instant, exactly once, or not at all.

The services' contract and the publish job's part, on SQLite, PostgreSQL and MariaDB
(``DATABASE_URL``): every item goes out in the same run at the release's time by the
database clock and never before; a release goes out once; what goes out is the version each
item pinned; an item that can no longer apply stops the release before its time, tells its
owner, and nothing of it goes out until an editor resolves it.
"""

from datetime import timedelta

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied

from coordination.clock import database_now
from publishing import history, posts, revisions
from publishing.exceptions import EditConflict, InvalidTransition, NotPublishable
from publishing.models import Post, PostRevision, PublishEvent
from releases import actions as releases
from releases.models import ItemAction, Release
from tests.publishing.conftest import live_post, make_post, run_publish_job

pytestmark = pytest.mark.django_db

A = ItemAction
S = Post.Status
R = PostRevision.Status
RS = Release.Status
K = PublishEvent.Kind


def soon(seconds: float = 3600):
    return database_now() + timedelta(seconds=seconds)


def make_due(release: Release, seconds_ago: float = 1) -> Release:
    """Move a scheduled release's time into the past, as if its time had come."""
    Release.objects.filter(pk=release.pk).update(
        release_at=database_now() - timedelta(seconds=seconds_ago)
    )
    release.refresh_from_db()
    return release


def went_out(release: Release):
    """Return the events of the changes ``release`` made to its posts."""
    return PublishEvent.objects.filter(data__release=release.pk).exclude(kind=K.REVISION_SCHEDULED)


def launch(editor, *, name="Launch") -> tuple[Release, Post, Post, PostRevision, Post]:
    """A release of a draft to publish, a live post's revision, and a live post to take down."""
    release = releases.create_release(name=name, user=editor)
    draft = make_post(title="New product")
    live = live_post(title="Pricing", body="Old prices.")
    revision = revisions.schedule_revision(
        post=live, title="Pricing", body="New prices.", publish_at=soon(7200), user=editor
    )
    old = live_post(title="Old product")
    for post in (draft, live, old):
        action = A.UNPUBLISH if post is old else None
        releases.add_item(release=release, post=post, action=action, user=editor)
    return release, draft, live, revision, old


def test_every_item_goes_out_in_one_run_at_the_release_time_and_never_before(editor):
    release, draft, live, revision, old = launch(editor)
    releases.schedule_release(release=release, release_at=soon(), user=editor)

    run_publish_job()
    statuses = dict(Post.objects.values_list("pk", "status"))
    assert (statuses[draft.pk], statuses[live.pk], statuses[old.pk]) == (
        S.DRAFT,
        S.PUBLISHED,
        S.PUBLISHED,
    )
    assert Post.objects.get(pk=live.pk).body == "Old prices."

    make_due(release)
    run_publish_job()

    release.refresh_from_db()
    assert release.status == RS.RELEASED
    assert release.released_at is not None
    draft, live, old = (Post.objects.get(pk=p.pk) for p in (draft, live, old))
    assert draft.status == S.PUBLISHED
    assert draft.published_at == release.released_at
    assert live.body == "New prices."
    assert PostRevision.objects.get(pk=revision.pk).status == R.PUBLISHED
    assert old.status == S.UNPUBLISHED
    events = went_out(release)
    assert sorted(events.values_list("post_id", "kind")) == sorted(
        [(draft.pk, K.PUBLISHED), (live.pk, K.REVISION_PUBLISHED), (old.pk, K.UNPUBLISHED)]
    )
    assert {e.at for e in events} == {release.released_at}
    assert history.describe(PublishEvent.objects.get(post=draft, kind=K.PUBLISHED)) == (
        "with the release “Launch”"
    )


def test_a_release_goes_out_once_however_often_the_job_runs(editor):
    release, draft, *_ = launch(editor)
    releases.schedule_release(release=release, release_at=soon(), user=editor)
    make_due(release)
    run_publish_job()
    version = Post.objects.get(pk=draft.pk).version
    run_publish_job(node="another-node")

    assert Post.objects.get(pk=draft.pk).version == version
    assert went_out(release).count() == 3


def test_the_publish_job_wakes_for_a_scheduled_release(editor):
    release, *_ = launch(editor)
    at = soon(600)
    releases.schedule_release(release=release, release_at=at, user=editor)
    assert run_publish_job() == at, "the publish job's next run"


def test_a_scheduled_revision_is_taken_into_the_release_and_not_switched_on_its_own(editor):
    live = live_post(title="Pricing", body="Old prices.")
    revision = revisions.schedule_revision(
        post=live, title="Pricing", body="New prices.", publish_at=soon(60), user=editor
    )
    release = releases.create_release(name="Later", user=editor)
    item = releases.add_item(release=release, post=live, user=editor)

    revision.refresh_from_db()
    assert (item.action, item.revision_id) == (A.REVISION, revision.pk)
    assert (revision.status, revision.publish_at) == (R.DRAFT, None)
    assert item.pinned_version == Post.objects.get(pk=live.pk).version
    PostRevision.objects.filter(pk=revision.pk).update(publish_at=database_now())
    run_publish_job()
    assert Post.objects.get(pk=live.pk).body == "Old prices."


def test_an_edit_after_adding_stops_the_release_at_once_and_tells_its_owner(
    editor, django_capture_on_commit_callbacks
):
    release, draft, *_ = launch(editor)
    releases.schedule_release(release=release, release_at=soon(), user=editor)
    with django_capture_on_commit_callbacks(execute=True):
        draft.body = "Changed after review."
        posts.save_post(post=draft, user=editor)

    release.refresh_from_db()
    assert release.status == RS.SCHEDULED
    assert "“New product”: The post was changed after it was added" in release.problem
    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == [editor.email]
    assert "Release “Launch” is stopped" in mail.outbox[0].subject
    assert "changed after it was added" in mail.outbox[0].body

    make_due(release)
    run_publish_job()
    assert Post.objects.get(pk=draft.pk).status == S.DRAFT
    assert not went_out(release).exists()

    # Refreshing the item (the editor checked the change) lets the release go out, with the
    # text as it is now.
    item = release.items.get(post=draft)
    releases.refresh_item(item=item, user=editor)
    release.refresh_from_db()
    assert release.problem == ""
    run_publish_job()
    assert Post.objects.get(pk=draft.pk).status == S.PUBLISHED
    assert Post.objects.get(pk=draft.pk).body == "Changed after review."


def test_a_deleted_post_stops_the_release_until_its_item_is_removed(admin_user):
    release, draft, live, revision, old = launch(admin_user)
    releases.schedule_release(release=release, release_at=soon(), user=admin_user)
    posts.delete_post(post=draft, user=admin_user)

    release.refresh_from_db()
    assert "“New product”: The post was deleted." in release.problem
    releases.remove_item(item=release.items.get(post=None), user=admin_user)
    release.refresh_from_db()
    assert release.problem == ""
    make_due(release)
    run_publish_job()
    release.refresh_from_db()
    assert release.status == RS.RELEASED


def test_a_post_taken_down_on_its_own_stops_the_release_that_would_revise_it(editor):
    release, draft, live, revision, old = launch(editor)
    releases.schedule_release(release=release, release_at=soon(), user=editor)
    Post.objects.filter(pk=live.pk).update(unpublish_at=database_now())
    run_publish_job()  # takes the post down at its own time

    release.refresh_from_db()
    assert "“Pricing”: The post was changed after it was added" in release.problem
    make_due(release)
    run_publish_job()
    assert Post.objects.get(pk=draft.pk).status == S.DRAFT
    assert Release.objects.get(pk=release.pk).status == RS.SCHEDULED


def test_a_release_whose_item_changed_unnoticed_is_stopped_at_its_time_and_nothing_goes_out(
    editor,
):
    release, draft, live, revision, old = launch(editor)
    releases.schedule_release(release=release, release_at=soon(), user=editor)
    # A change no action reported (a script writing the row directly).
    Post.objects.filter(pk=old.pk).update(version=old.version + 5)
    make_due(release)
    run_publish_job()

    release.refresh_from_db()
    assert release.status == RS.SCHEDULED
    assert "“Old product”" in release.problem
    assert Post.objects.get(pk=draft.pk).status == S.DRAFT
    assert Post.objects.get(pk=live.pk).body == "Old prices."


@pytest.mark.parametrize(
    ("prepare", "says"),
    [
        (lambda editor: make_post(status=S.SCHEDULED, publish_at=soon()), "scheduled on its own"),
        (lambda editor: live_post(), "no pending revision"),
    ],
)
def test_adding_a_post_that_cannot_go_out_is_refused_saying_why(editor, prepare, says):
    release = releases.create_release(name="Launch", user=editor)
    with pytest.raises(InvalidTransition, match=says):
        releases.add_item(release=release, post=prepare(editor), user=editor)
    assert not release.items.exists()


def test_a_post_goes_out_with_one_pending_release_at_a_time(editor):
    first = releases.create_release(name="First", user=editor)
    second = releases.create_release(name="Second", user=editor)
    draft = make_post()
    releases.add_item(release=first, post=draft, user=editor)
    with pytest.raises(InvalidTransition, match="already in the release “First”"):
        releases.add_item(release=second, post=draft, user=editor)
    with pytest.raises(InvalidTransition, match="in “First” already"):
        releases.add_item(release=first, post=draft, user=editor)
    releases.cancel_release(release=first, user=editor)
    releases.add_item(release=second, post=draft, user=editor)


def test_a_stale_page_cannot_change_a_release_a_colleague_changed(editor):
    release = releases.create_release(name="Launch", user=editor)
    seen = release.version
    releases.add_item(release=release, post=make_post(), user=editor, expected_version=seen)
    with pytest.raises(EditConflict, match="was changed by editor"):
        releases.schedule_release(
            release=release, release_at=soon(), user=editor, expected_version=seen
        )
    assert Release.objects.get(pk=release.pk).status == RS.DRAFT


def test_release_now_sends_everything_out_at_once_or_nothing(editor):
    release, draft, live, revision, old = launch(editor)
    Post.objects.filter(pk=old.pk).update(version=old.version + 1)
    with pytest.raises(NotPublishable, match="“Old product”"):
        releases.release_now(release=release, user=editor)
    assert Post.objects.get(pk=draft.pk).status == S.DRAFT

    releases.refresh_item(item=release.items.get(post=old), user=editor)
    releases.release_now(release=release, user=editor)
    release.refresh_from_db()
    assert release.status == RS.RELEASED
    assert Post.objects.get(pk=draft.pk).status == S.PUBLISHED
    assert Post.objects.get(pk=old.pk).status == S.UNPUBLISHED
    event = PublishEvent.objects.get(post=draft, kind=K.PUBLISHED)
    assert event.user == editor
    assert event.data["by_hand"] is True


def test_scheduling_a_release_that_would_stop_is_refused(editor):
    release = releases.create_release(name="Empty", user=editor)
    with pytest.raises(InvalidTransition, match="no items yet"):
        releases.schedule_release(release=release, release_at=soon(), user=editor)
    draft = make_post()
    releases.add_item(release=release, post=draft, user=editor)
    Post.objects.filter(pk=draft.pk).update(version=draft.version + 3)
    with pytest.raises(NotPublishable, match="changed after it was added"):
        releases.schedule_release(release=release, release_at=soon(), user=editor)


def test_only_editors_who_may_publish_put_releases_together(drafter, editor):
    with pytest.raises(PermissionDenied):
        releases.create_release(name="Launch", user=drafter)
    release = releases.create_release(name="Launch", user=editor)
    with pytest.raises(PermissionDenied):
        releases.add_item(release=release, post=make_post(), user=drafter)
    with pytest.raises(PermissionDenied):
        releases.release_now(release=release, user=drafter)


def test_a_release_the_database_refuses_is_stopped_alone_and_the_publish_job_goes_on(
    editor, monkeypatch
):
    from publishing.setbased import ConcurrentChange
    from releases import apply as release_apply

    refused = releases.create_release(name="Refused", user=editor)
    kept = releases.create_release(name="Kept", user=editor)
    first, second = make_post(title="In refused"), make_post(title="In kept")
    releases.add_item(release=refused, post=first, user=editor)
    releases.add_item(release=kept, post=second, user=editor)
    for release in (refused, kept):
        releases.schedule_release(release=release, release_at=soon(), user=editor)
        make_due(release)
    due = make_post(title="Due on its own", status=S.SCHEDULED, publish_at=database_now())
    real = release_apply.change_release_posts

    def refuse_one(change):
        if change.release_id == refused.pk:
            raise ConcurrentChange("1 posts to change, 0 changed; rolling back")
        return real(change)

    monkeypatch.setattr(release_apply, "change_release_posts", refuse_one)
    run_publish_job()

    refused.refresh_from_db()
    assert refused.status == RS.SCHEDULED
    assert "It could not go out, and nothing of it did" in refused.problem
    assert Post.objects.get(pk=first.pk).status == S.DRAFT
    assert Release.objects.get(pk=kept.pk).status == RS.RELEASED
    assert Post.objects.get(pk=second.pk).status == S.PUBLISHED
    assert Post.objects.get(pk=due.pk).status == S.PUBLISHED
