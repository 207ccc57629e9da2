"""The publish job: declared in the publishing group, run directly and by the real engine."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import override_settings

from coordination.clock import database_now
from coordination.models import JobRun, JobState
from coordination.registry import registry
from coordination.scheduler import Scheduler
from coordination.schedules import WhenDue
from publishing import job_names
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import due_post, future_post, make_post, run_publish_job

S = Post.Status


def test_the_publish_job_is_declared_as_the_brief_says():
    job = registry.get("publishing.publish_due")
    assert job is not None
    assert job.group == "publishing"
    assert job.transactional
    assert isinstance(job.schedule, WhenDue)
    assert job.schedule.fallback == timedelta(seconds=60)


@pytest.mark.django_db
def test_job_publishes_due_posts_and_returns_the_next_due_instant():
    due = due_post()
    soon = future_post(seconds_ahead=120)
    now = database_now()
    expiring = make_post(status=S.PUBLISHED, unpublish_at=now + timedelta(seconds=60))
    next_due = run_publish_job(node="node-x")
    due.refresh_from_db()
    assert due.status == S.PUBLISHED
    assert due.events.get().node == "node-x"
    assert next_due == expiring.unpublish_at, "the nearer of next publish and next unpublish"
    expiring.delete()
    assert run_publish_job() == soon.publish_at


@pytest.mark.django_db
def test_job_returns_none_when_nothing_is_scheduled():
    make_post()
    assert run_publish_job() is None


@pytest.mark.django_db
@override_settings(INSTATIC_PUBLISH_BATCH_SIZE=2)
def test_a_full_batch_asks_to_run_again_at_once():
    posts = [due_post(seconds_ago=5 - i) for i in range(3)]
    next_due = run_publish_job()
    assert next_due <= database_now(), "more is due right now"
    assert Post.objects.filter(status=S.PUBLISHED).count() == 2
    assert run_publish_job() is None
    assert {p.pk for p in Post.objects.filter(status=S.PUBLISHED)} == {p.pk for p in posts}


@pytest.mark.django_db
def test_job_also_unpublishes_expired_posts():
    now = database_now()
    post = make_post(status=S.PUBLISHED, unpublish_at=now - timedelta(seconds=1))
    run_publish_job()
    post.refresh_from_db()
    assert post.status == S.UNPUBLISHED


@pytest.mark.django_db(transaction=True)
def test_the_engine_runs_the_publish_job_in_process():
    """One real scheduler tick (``runscheduler --once --group publishing``) in this process."""
    due = [due_post(seconds_ago=s) for s in (3, 2, 1)]
    upcoming = future_post(seconds_ahead=15)
    scheduler = Scheduler(groups=["publishing"], node_name="engine-test", once=True)
    scheduler.run()

    for post in due:
        post.refresh_from_db()
        assert post.status == S.PUBLISHED
        assert post.published_at >= post.publish_at, "never early"
    events = PublishEvent.objects.filter(kind=PublishEvent.Kind.PUBLISHED)
    assert sorted(events.values_list("post_id", flat=True)) == sorted(p.pk for p in due)
    assert set(events.values_list("node", flat=True)) == {"engine-test"}
    run = JobRun.objects.get(job=job_names.PUBLISH_JOB)
    assert (run.status, run.node) == (JobRun.Status.SUCCEEDED, "engine-test")
    state = JobState.objects.get(name=job_names.PUBLISH_JOB)
    assert state.next_due == upcoming.publish_at, "the scheduler sleeps until the next post"
    upcoming.refresh_from_db()
    assert upcoming.status == S.SCHEDULED


@pytest.mark.django_db(transaction=True)
def test_a_due_post_locked_by_another_transaction_does_not_make_the_job_due_at_once():
    """The job skips a row-locked post; it must look again later, not loop on it."""
    if not connection.features.has_select_for_update_skip_locked:
        pytest.skip("SKIP LOCKED needs row locks (PostgreSQL, MariaDB)")
    post = due_post()
    locked, release = threading.Event(), threading.Event()

    def hold_row_lock():
        with transaction.atomic():
            list(Post.objects.select_for_update().filter(pk=post.pk))
            locked.set()
            release.wait(30)
        connection.close()

    holder = threading.Thread(target=hold_row_lock)
    holder.start()
    try:
        assert locked.wait(10)
        before = database_now()
        next_due = run_publish_job()
        assert next_due >= before + timedelta(seconds=0.5), "due again at once: a busy loop"
        post.refresh_from_db()
        assert post.status == S.SCHEDULED
    finally:
        release.set()
        holder.join()
    assert run_publish_job() is None
    post.refresh_from_db()
    assert post.status == S.PUBLISHED
