"""Scheduled revisions under real concurrency: two leaders' ticks, editors racing the job,
and real ``runscheduler`` replicas. A revision goes live exactly once; a cancelled or
superseded one never does.

Each actor runs in its own thread on its own database connection; events order the steps, so
the interleaving is chosen, not hoped for. The row-lock tests need PostgreSQL or MariaDB
(SQLite has no row locks: one writer holds the whole database); the replicas run everywhere.
"""

import threading
from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import Count, F

from coordination.clock import database_now
from publishing import actions, batches, revisions
from publishing.exceptions import InvalidTransition
from publishing.models import Post, PostRevision, PublishEvent
from tests.publishing.conftest import Actor, live_post, make_due
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

R = PostRevision.Status
K = PublishEvent.Kind


def scheduled(post, title: str, seconds: float = 3600):
    return revisions.schedule_revision(
        post=post,
        title=title,
        body=f"{title}, the body.",
        publish_at=database_now() + timedelta(seconds=seconds),
        user=None,
    )


def assert_switched_once(posts: list[Post]) -> None:
    counts = dict(
        PublishEvent.objects.filter(kind=K.REVISION_PUBLISHED)
        .values_list("post")
        .annotate(n=Count("id"))
        .values_list("post", "n")
    )
    assert counts == {post.pk: 1 for post in posts}


@pytest.mark.server
def test_two_leaders_ticking_at_once_switch_each_revision_exactly_once():
    """A stale leader and a new one run the batch together: they share the work, none twice."""
    posts = [live_post(title=f"Old {n}") for n in range(60)]
    for n, post in enumerate(posts):
        make_due(scheduled(post, f"New {n}"), seconds_ago=60 - n)
    versions = dict(Post.objects.values_list("pk", "version"))
    start = threading.Barrier(2)

    def leader(node):
        def tick():
            start.wait(10)
            switched = []
            while True:
                result = batches.switch_due_revisions(batch_size=7, node=node)
                switched += result.done
                if not result.selected:
                    return switched

        return Actor(tick)

    leaders = [leader("old-leader"), leader("new-leader")]
    for actor in leaders:
        actor.start()
    done = [actor.outcome() for actor in leaders]
    assert sorted(done[0] + done[1]) == sorted(
        PostRevision.objects.filter(status=R.PUBLISHED, number=2).values_list("pk", flat=True)
    )
    assert not set(done[0]) & set(done[1]), "no revision switched by both"
    assert_switched_once(posts)
    for post in Post.objects.filter(pk__in=versions):
        assert post.version == versions[post.pk] + 1, "each post written once by the switch"
        assert post.title.startswith("New")


@pytest.mark.server
def test_a_revision_an_editor_is_cancelling_is_skipped_and_the_cancel_wins():
    post = live_post(title="Old")
    revision = make_due(scheduled(post, "Planned"))
    other = make_due(scheduled(live_post(title="Other"), "Other, revised"))
    cancelling, release = threading.Event(), threading.Event()

    def editor():
        with transaction.atomic():
            revisions.cancel_revision(revision=revision, user=None)
            cancelling.set()  # holds the post's row lock until released
            release.wait(30)

    editor_actor = Actor(editor)
    editor_actor.start()
    assert cancelling.wait(10)
    # The job does not wait for the editor: it skips that post and switches the others.
    job = Actor(lambda: batches.switch_due_revisions(node="leader"))
    job.start()
    result = job.outcome(timeout=10)
    assert result.done == [other.pk]
    release.set()
    editor_actor.outcome()
    assert batches.switch_due_revisions(node="leader").done == []
    assert Post.objects.get(pk=post.pk).title == "Old"
    assert PostRevision.objects.get(pk=revision.pk).status == R.CANCELLED


@pytest.mark.server
def test_the_job_never_waits_for_an_editor_holding_the_post():
    """An editor's action locks the post first, then its revisions. A job that locked the
    revision and then waited for the post would deadlock with it; it skips the post instead."""
    post = live_post(title="Old")
    revision = make_due(scheduled(post, "Planned"))
    holding, release = threading.Event(), threading.Event()

    def editor():
        with transaction.atomic():
            actions.lock(post)  # the first step of every editor action on the post
            holding.set()
            release.wait(30)
            revisions.cancel_revision(revision=revision, user=None)

    editor_actor = Actor(editor)
    editor_actor.start()
    assert holding.wait(10)
    try:
        job = Actor(lambda: batches.switch_due_revisions(node="leader"))
        job.start()
        assert job.outcome(timeout=10).done == [], "skipped, not waited for"
    finally:
        release.set()
    editor_actor.outcome()
    assert PostRevision.objects.get(pk=revision.pk).status == R.CANCELLED


@pytest.mark.server
def test_a_cancel_that_comes_while_the_job_switches_is_refused_not_lost():
    post = live_post(title="Old")
    revision = make_due(scheduled(post, "Planned"))
    switched, release = threading.Event(), threading.Event()

    def leader():
        with transaction.atomic():
            result = batches.switch_due_revisions(node="leader")
            switched.set()  # holds the post's row lock until released
            release.wait(30)
            return result

    job = Actor(leader)
    job.start()
    assert switched.wait(10)
    editor = Actor(lambda: revisions.cancel_revision(revision=revision, user=None))
    editor.start()
    release.set()
    assert job.outcome().done == [revision.pk]
    with pytest.raises(InvalidTransition, match="it went live at"):
        editor.outcome()
    assert Post.objects.get(pk=post.pk).title == "Planned"


@pytest.mark.multiprocess
def test_two_replicas_switch_revisions_exactly_once_and_never_a_cancelled_one(schedulers):
    """Real ``runscheduler`` processes, woken at the revisions' times like for a publish.

    They start once every revision is scheduled: a revision the test means to supersede must
    not go live first because the editors' steps took longer than its time (a busy machine's
    SQLite writes wait on each other); one due before they are up is caught up on.
    """
    posts = [live_post(title=f"Old {n}") for n in range(40)]
    kept, cancelled, superseded = [], [], []
    for n, post in enumerate(posts):
        revision = scheduled(post, f"New {n}", seconds=4 + n % 3)
        if n % 4 == 1:
            revisions.cancel_revision(revision=revision, user=None)
            cancelled.append(post)
        elif n % 4 == 2:
            superseded.append(revision)
            scheduled(post, f"Newer {n}", seconds=5)
            kept.append(post)
        else:
            kept.append(post)
    replicas = [schedulers(f"rev-{n}", "publishing") for n in range(2)]
    for replica in replicas:
        replica.wait_for_log("running groups")
    wait_until(
        lambda: not PostRevision.objects.filter(status=R.SCHEDULED).exists(),
        timeout=60,
        message="scheduled revisions were not all switched within 60 s",
    )
    assert_switched_once(kept)
    switched = PostRevision.objects.filter(status=R.PUBLISHED, post__in=kept).exclude(number=1)
    assert switched.count() == len(kept)
    assert not switched.filter(published_at__lt=F("publish_at")).exists(), "went live early"
    for post in Post.objects.filter(pk__in=[p.pk for p in kept]):
        assert post.title == switched.get(post=post).title
    untouched = Post.objects.filter(pk__in=[p.pk for p in cancelled])
    assert set(untouched.values_list("title", flat=True)) == {p.title for p in cancelled}
    assert set(
        PostRevision.objects.filter(pk__in=[r.pk for r in superseded]).values_list(
            "status", flat=True
        )
    ) == {R.SUPERSEDED}
    nodes = set(
        PublishEvent.objects.filter(kind=K.REVISION_PUBLISHED).values_list("node", flat=True)
    )
    assert nodes <= {"rev-0", "rev-1"}
