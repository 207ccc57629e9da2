"""Real concurrency on PostgreSQL: row locks, SKIP LOCKED and the scheduler's wake-up NOTIFY.

Each "actor" (an editor, a replica's publish batch) runs in its own thread with its own
database connection; events order the steps, so the interleaving is chosen, not hoped for.
"""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction

from coordination.clock import database_now
from coordination.registry import group
from publishing import batches, posts
from publishing.exceptions import EditConflict, InvalidTransition
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import Actor, due_post, make_post, publish_job_state
from tests.support.databases import separate_postgresql_session
from tests.support.polling import wait_until

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

S = Post.Status
K = PublishEvent.Kind


def lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def test_a_post_an_editor_is_cancelling_is_skipped_and_the_cancel_wins():
    victim = due_post(seconds_ago=20)
    other = due_post(seconds_ago=10)
    cancelled, release = threading.Event(), threading.Event()

    def cancel_and_hold():
        with transaction.atomic():
            posts.cancel_schedule(post=victim, user=None)
            cancelled.set()
            release.wait(10)

    editor = Actor(cancel_and_hold)
    editor.start()
    assert cancelled.wait(10)
    started = time.monotonic()
    result = batches.publish_due(node="replica-1")
    waited = time.monotonic() - started
    release.set()
    editor.join(10)
    assert editor.error is None
    assert waited < 5, "the batch must skip the locked row, not wait for it"
    assert result.done == [other.pk]
    victim.refresh_from_db()
    assert (victim.status, victim.published_at) == (S.DRAFT, None)
    assert batches.publish_due(node="replica-1").done == []
    assert not victim.events.filter(kind=K.PUBLISHED).exists()


def test_a_cancel_waiting_on_a_publishing_batch_reports_the_publish():
    post = due_post()
    published, release = threading.Event(), threading.Event()

    def publish_and_hold():
        with transaction.atomic():
            result = batches.publish_due(node="replica-1")
            published.set()
            release.wait(10)
            return result

    batch = Actor(publish_and_hold)
    batch.start()
    assert published.wait(10)
    editor = Actor(lambda: posts.cancel_schedule(post=post, user=None))
    editor.start()
    wait_until(lambda: lock_waiters() >= 1, message="the cancel never waited on the row lock")
    release.set()
    batch.join(10)
    editor.join(10)
    assert batch.error is None and batch.result.done == [post.pk]
    assert isinstance(editor.error, InvalidTransition)
    assert "already published" in str(editor.error)
    post.refresh_from_db()
    assert post.status == S.PUBLISHED
    assert list(post.events.values_list("kind", flat=True)) == [K.PUBLISHED]


def test_two_replicas_publishing_at_once_split_the_work_and_publish_each_post_once():
    posts = [due_post(seconds_ago=60 - i) for i in range(6)]
    holding, release = threading.Event(), threading.Event()

    def first_replica():
        with transaction.atomic():
            result = batches.publish_due(batch_size=3, node="replica-1")
            holding.set()
            release.wait(10)
            return result

    replica = Actor(first_replica)
    replica.start()
    assert holding.wait(10)
    second = batches.publish_due(batch_size=10, node="replica-2")
    release.set()
    replica.join(10)
    assert replica.error is None
    first = replica.result
    assert len(first.done) == 3 and len(second.done) == 3
    assert set(first.done) | set(second.done) == {p.pk for p in posts}
    events = PublishEvent.objects.filter(kind=K.PUBLISHED)
    assert events.count() == 6
    assert sorted(events.values_list("post_id", flat=True)) == sorted(p.pk for p in posts)


def test_scheduling_wakes_the_scheduler_with_notify_at_commit():
    listener = separate_postgresql_session()
    channel = group("publishing").channel
    publish_job_state()  # as the leader keeps it: a wake-up moves its instant, and wakes it
    try:
        listener.execute(f"LISTEN {channel}")
        post = make_post()
        with transaction.atomic():
            posts.schedule_post(
                post=post, publish_at=database_now() + timedelta(minutes=5), user=None
            )
            early = list(listener.notifies(timeout=0.2, stop_after=1))
            assert early == [], "NOTIFY is delivered at commit, not before"
        received = list(listener.notifies(timeout=5, stop_after=1))
        assert [n.channel for n in received] == [channel]
    finally:
        listener.close()


def test_two_editors_saving_one_version_the_second_waits_for_the_lock_and_is_refused():
    """The version is compared under the row lock: the loser sees the winner's commit."""
    post = make_post(body="original")
    opened = post.version
    saved, release = threading.Event(), threading.Event()

    def save_and_hold():
        with transaction.atomic():
            mine = Post.objects.get(pk=post.pk)
            mine.body = "first editor"
            posts.save_post(post=mine, user=None, expected_version=opened)
            saved.set()
            release.wait(10)

    def save_second():
        theirs = Post.objects.get(pk=post.pk)
        theirs.body = "second editor"
        posts.save_post(post=theirs, user=None, expected_version=opened)

    first = Actor(save_and_hold)
    first.start()
    assert saved.wait(10)
    second = Actor(save_second)
    second.start()
    wait_until(lambda: lock_waiters() >= 1, timeout=10, message="second editor waits on the lock")
    release.set()
    first.join(10)
    second.join(10)
    assert first.error is None
    assert isinstance(second.error, EditConflict)
    post.refresh_from_db()
    assert (post.body, post.version) == ("first editor", opened + 1)
