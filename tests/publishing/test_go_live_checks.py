"""Go-live checks: an app's check is asked on every path that puts content live (the publish
job's posts and revisions, a release at its time and "Release now"), in the transaction that
does it, and what it holds stays out with its reason."""

from datetime import timedelta

import pytest

from coordination.clock import database_now
from publishing import go_live, revisions
from publishing.exceptions import NotPublishable
from publishing.models import Post, PostRevision
from releases import actions as releases
from releases.models import Release
from tests.publishing.conftest import due_post, live_post, make_due, make_post, run_publish_job

pytestmark = pytest.mark.django_db

S = Post.Status
WHY = "The legal team has not signed this off."


@pytest.fixture
def legal_hold(monkeypatch):
    """A check that holds everything whose title says "embargoed"; returns what it was asked."""
    asked: list[tuple[str, list[int]]] = []

    def check(kind: str, ids: list[int]) -> dict[int, str]:
        asked.append((kind, list(ids)))
        model = {go_live.POST: Post, go_live.REVISION: PostRevision, go_live.RELEASE: Release}[kind]
        field = "name" if kind == go_live.RELEASE else "title"
        held = model.objects.filter(pk__in=ids, **{f"{field}__icontains": "embargoed"})
        return dict.fromkeys(held.values_list("pk", flat=True), WHY)

    monkeypatch.setattr(go_live, "_checks", [*go_live._checks, check])
    return asked


def test_no_check_holds_nothing():
    assert go_live.why_not(go_live.POST, [1, 2]) == {}


def test_the_first_check_that_holds_says_why(monkeypatch):
    monkeypatch.setattr(
        go_live,
        "_checks",
        [lambda kind, ids: {1: "first"}, lambda kind, ids: {1: "second", 2: "other"}],
    )
    assert go_live.why_not(go_live.POST, [1, 2, 3]) == {1: "first", 2: "other"}


def test_the_publish_job_holds_a_due_post_a_check_holds_and_says_why(legal_hold):
    held = due_post(title="Results (embargoed)")
    free = due_post(title="Results")
    run_publish_job()
    held.refresh_from_db()
    assert (held.status, held.last_error) == (S.SCHEDULED, WHY)
    assert Post.objects.get(pk=free.pk).status == S.PUBLISHED
    assert (go_live.POST, {held.pk, free.pk}) in [(kind, set(ids)) for kind, ids in legal_hold]


def test_the_publish_job_sets_a_held_revision_aside_with_the_checks_words(legal_hold, editor):
    post = live_post(title="Pricing", body="Old prices.")
    revision = revisions.schedule_revision(
        post=post,
        title="Pricing (embargoed)",
        body="New prices.",
        publish_at=database_now() + timedelta(hours=1),
        user=editor,
    )
    make_due(revision)
    run_publish_job()
    revision.refresh_from_db()
    assert revision.status == PostRevision.Status.SUPERSEDED
    assert WHY in revision.note
    assert Post.objects.get(pk=post.pk).body == "Old prices."


def test_a_release_a_check_holds_stops_at_its_time_and_release_now_is_refused(legal_hold, editor):
    release = releases.create_release(name="Launch (embargoed)", user=editor)
    releases.add_item(release=release, post=make_post(title="Offer"), user=editor)
    with pytest.raises(NotPublishable, match="legal team"):
        releases.release_now(release=release, user=editor)
    releases.schedule_release(
        release=release, release_at=database_now() + timedelta(seconds=30), user=editor
    )
    Release.objects.filter(pk=release.pk).update(release_at=database_now() - timedelta(seconds=1))
    run_publish_job()
    release.refresh_from_db()
    assert (release.status, release.problem) == (Release.Status.SCHEDULED, WHY)
    assert Post.objects.get(title="Offer").status == S.DRAFT
