"""A backlog drains beside the posts that are due now, never in front of them.

Posts due longer ago than ``INSTATIC_PUBLISH_ON_TIME_WINDOW`` are the backlog job's; the publish
job takes only what fell due within the window, wakes the backlog job without waiting for it,
and the two run side by side (one job thread each) without ever publishing a post twice.
"""

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
from tests.publishing.conftest import due_post, future_post, run_job
from tests.support.polling import wait_until

S = Post.Status
K = PublishEvent.Kind


def statuses(posts) -> list[str]:
    return [Post.objects.get(pk=p.pk).status for p in posts]


def test_the_backlog_job_is_a_transactional_job_of_the_publishing_group():
    job = registry.get(job_names.BACKLOG_JOB)
    assert (job.group, job.transactional) == ("publishing", True)
    assert isinstance(job.schedule, WhenDue)


@pytest.mark.django_db
def test_the_publish_job_leaves_overdue_posts_to_the_backlog_job_and_wakes_it():
    JobState.objects.create(name=job_names.BACKLOG_JOB, group="publishing")
    overdue = due_post(seconds_ago=60)
    recent = due_post(seconds_ago=2)
    upcoming = future_post(seconds_ahead=120)
    next_due = run_job(job_names.PUBLISH_JOB)
    assert statuses([overdue, recent]) == [S.SCHEDULED, S.PUBLISHED]
    assert next_due == upcoming.publish_at, "the backlog does not make the publish job spin"
    woken = JobState.objects.get(name=job_names.BACKLOG_JOB).wake_at
    assert woken is not None and woken <= database_now()

    assert run_job(job_names.BACKLOG_JOB) is None
    assert statuses([overdue, upcoming]) == [S.PUBLISHED, S.SCHEDULED]
    event = PublishEvent.objects.get(post=overdue)
    assert event.kind == K.PUBLISHED and event.lateness >= 60


@pytest.mark.django_db
@override_settings(INSTATIC_PUBLISH_BACKLOG_BATCH_SIZE=2, INSTATIC_PUBLISH_BATCH_SIZE=1)
def test_the_backlog_job_drains_newest_first_batch_after_batch():
    posts = [due_post(seconds_ago=100 - i) for i in range(5)]
    recent = due_post(seconds_ago=1)
    assert run_job(job_names.BACKLOG_JOB) <= database_now(), "a full batch: more right now"
    assert statuses(posts) == [S.SCHEDULED] * 3 + [S.PUBLISHED] * 2
    assert run_job(job_names.BACKLOG_JOB) <= database_now()
    assert run_job(job_names.BACKLOG_JOB) is None
    assert statuses(posts) == [S.PUBLISHED] * 5
    assert statuses([recent]) == [S.SCHEDULED], "what is due now is the publish job's"


@pytest.mark.django_db(transaction=True)
def test_a_running_backlog_batch_does_not_hold_up_the_publish_job():
    """The backlog job's run holds its state row and its posts; the publish job goes on."""
    if not connection.features.has_select_for_update_skip_locked:
        pytest.skip("runs side by side only with row locks (PostgreSQL, MariaDB)")
    JobState.objects.create(name=job_names.BACKLOG_JOB, group="publishing")
    overdue = due_post(seconds_ago=60)
    recent = due_post(seconds_ago=1)
    holding, release = threading.Event(), threading.Event()

    def backlog_run_in_progress():
        with transaction.atomic():
            list(JobState.objects.select_for_update().filter(name=job_names.BACKLOG_JOB))
            list(Post.objects.select_for_update().filter(pk=overdue.pk))
            holding.set()
            release.wait(30)
        connection.close()

    holder = threading.Thread(target=backlog_run_in_progress)
    holder.start()
    done = threading.Event()

    def publish_job():
        try:
            run_job(job_names.PUBLISH_JOB)
        finally:
            connection.close()
            done.set()

    try:
        assert holding.wait(10)
        threading.Thread(target=publish_job).start()
        wait_until(done.is_set, timeout=20, message="the publish job waited for the backlog's run")
        assert statuses([overdue, recent]) == [S.SCHEDULED, S.PUBLISHED]
    finally:
        release.set()
        holder.join()
        done.wait(30)


@pytest.mark.django_db(transaction=True)
def test_one_tick_of_the_engine_publishes_the_backlog_and_the_posts_due_now():
    overdue = [due_post(seconds_ago=3600 + s) for s in range(3)]
    recent = due_post(seconds_ago=1)
    Scheduler(groups=["publishing"], node_name="backlog-test", once=True).run()
    assert statuses([recent]) == [S.PUBLISHED]
    # The two jobs ran side by side; on MariaDB the publish job's range scan can hold the
    # newest overdue row for a moment, and the backlog job skips it and looks again a
    # second later (its next run finishes here).
    if Post.objects.filter(status=S.SCHEDULED).exists():
        next_due = JobState.objects.get(name=job_names.BACKLOG_JOB).next_due
        assert next_due <= database_now() + timedelta(seconds=1)
        run_job(job_names.BACKLOG_JOB)
    assert statuses([*overdue, recent]) == [S.PUBLISHED] * 4
    counts = PublishEvent.objects.filter(kind=K.PUBLISHED).values_list("post_id", flat=True)
    assert sorted(counts) == sorted(p.pk for p in [*overdue, recent]), "each exactly once"
    jobs = set(JobRun.objects.values_list("job", flat=True))
    assert jobs == {job_names.PUBLISH_JOB, job_names.BACKLOG_JOB, job_names.LATE_JOB}


@pytest.mark.django_db(transaction=True)
def test_while_a_backlog_drains_the_publish_job_leaves_the_backlog_jobs_row_unlocked():
    """The backlog job is due already while it drains: the publish job must not lock its row.

    Locked until the publish job's run committed, the row made the backlog job's next batch
    find it held and wait (the engine's check that no earlier run is still alive), again and
    again while on-time posts kept the publish job running.
    """
    if not connection.features.has_select_for_update_nowait:
        pytest.skip("row locks: PostgreSQL, MariaDB")
    JobState.objects.create(name=job_names.BACKLOG_JOB, group="publishing", next_due=database_now())
    overdue = due_post(seconds_ago=60)
    recent = due_post(seconds_ago=1)
    ran, checked = threading.Event(), threading.Event()

    def publish_run_not_yet_committed():
        try:
            with transaction.atomic():
                run_job(job_names.PUBLISH_JOB)
                ran.set()
                checked.wait(30)
        finally:
            connection.close()

    runner = threading.Thread(target=publish_run_not_yet_committed)
    runner.start()
    try:
        assert ran.wait(20)
        with transaction.atomic():
            locked = JobState.objects.select_for_update(nowait=True)
            assert list(locked.filter(name=job_names.BACKLOG_JOB).values_list("pk", flat=True))
    finally:
        checked.set()
        runner.join()
    assert statuses([overdue, recent]) == [S.SCHEDULED, S.PUBLISHED]
