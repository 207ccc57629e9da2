"""The publish job's batches (publishing.batches): due publishes, unpublishes, failures, races."""

import logging
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from coordination.clock import database_now
from publishing import batches, posts
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import due_post, future_post, kinds, make_post, publish_job_state

pytestmark = pytest.mark.django_db

S = Post.Status
K = PublishEvent.Kind


# --- due publishes ----------------------------------------------------------------------


def test_publish_due_publishes_only_due_scheduled_posts():
    due = [due_post(seconds_ago=s) for s in (30, 5)]
    future = future_post(seconds_ahead=60)
    draft = make_post(publish_at=database_now() - timedelta(minutes=1))
    before = database_now()
    result = batches.publish_due(node="node-a")
    after = database_now()
    assert sorted(result.done) == sorted(p.pk for p in due)
    assert not result.more
    for post in due:
        post.refresh_from_db()
        assert post.status == S.PUBLISHED
        assert before <= post.published_at <= after
        event = post.events.get()
        assert (event.kind, event.node, event.actor) == (K.PUBLISHED, "node-a", "node-a")
        expected = (post.published_at - post.publish_at).total_seconds()
        assert event.lateness == pytest.approx(expected)
        assert event.lateness >= 0
    for post in (future, draft):
        post.refresh_from_db()
        assert post.status in (S.SCHEDULED, S.DRAFT)
        assert post.published_at is None
        assert not post.events.exists()
    assert batches.publish_due(node="node-a").done == [], "nothing is published twice"
    assert PublishEvent.objects.filter(kind=K.PUBLISHED).count() == 2


def test_due_decisions_use_the_database_clock_not_the_app_server_clock():
    post = future_post(seconds_ahead=1800)
    app_clock_two_hours_fast = database_now() + timedelta(hours=2)
    with mock.patch("django.utils.timezone.now", return_value=app_clock_two_hours_fast):
        assert timezone.now() == app_clock_two_hours_fast
        result = batches.publish_due(node="n")
    assert result.done == []
    post.refresh_from_db()
    assert post.status == S.SCHEDULED


def test_publish_due_works_in_batches_newest_due_first():
    """A backlog never delays what fell due just now: each batch takes the newest due."""
    posts = [due_post(seconds_ago=100 - i) for i in range(5)]
    first = batches.publish_due(batch_size=2)
    assert first.done == [posts[3].pk, posts[4].pk]
    assert first.more
    second = batches.publish_due(batch_size=2)
    assert second.done == [posts[1].pk, posts[2].pk]
    third = batches.publish_due(batch_size=2)
    assert third.done == [posts[0].pk]
    assert not third.more


def test_a_failing_post_stays_scheduled_with_its_error_and_does_not_block_others(caplog):
    bad = due_post(seconds_ago=60, title="")
    good = due_post(seconds_ago=10)
    with caplog.at_level(logging.ERROR, logger="publishing.batches"):
        result = batches.publish_due(node="node-a")
    assert result.done == [good.pk]
    assert result.failed == [bad.pk]
    bad.refresh_from_db()
    assert bad.status == S.SCHEDULED, "a failed post is not reverted to draft"
    assert bad.last_error == "the title is empty"
    assert bad.is_failed
    event = bad.events.get()
    assert (event.kind, event.node, event.data) == (
        K.FAILED,
        "node-a",
        {"error": "the title is empty"},
    )
    assert event.lateness == pytest.approx((result.now - bad.publish_at).total_seconds())
    assert event.lateness >= 60
    assert any(
        f"post {bad.pk}" in r.getMessage()
        and f"due at {bad.publish_at.isoformat()} failed to publish" in r.getMessage()
        for r in caplog.records
    )
    # Later batches skip it instead of failing it again and again.
    assert batches.publish_due(node="node-a").selected == 0
    assert bad.events.count() == 1


def test_editing_a_failed_post_clears_the_error_and_it_publishes(editor):
    state = publish_job_state()
    bad = due_post(body="   ")
    batches.publish_due()
    bad.refresh_from_db()
    assert "the body is empty" in bad.last_error
    bad.body = "Written at last."
    posts.save_post(post=bad, user=editor)
    bad.refresh_from_db()
    assert bad.last_error == ""
    state.refresh_from_db()
    assert state.wake_at == bad.publish_at, "the edit wakes the scheduler: it is overdue"
    assert batches.publish_due().done == [bad.pk]
    assert kinds(bad) == [K.FAILED, K.PUBLISHED]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("", "the body is empty"),
        ("     ", "the body is empty"),
        ("x" * 51, "the body is longer than 50 characters"),
    ],
)
@override_settings(INSTATIC_POST_BODY_MAX_CHARS=50)
def test_publish_time_body_checks(body, problem):
    post = due_post(body=body)
    result = batches.publish_due()
    assert result.failed == [post.pk]
    post.refresh_from_db()
    assert post.last_error == problem


@pytest.mark.sqlite
def test_publish_time_title_length_check():
    """Only SQLite lets a too-long title into the table; the publish check still catches it."""
    post = due_post(title="t" * 201)
    assert batches.publish_due().failed == [post.pk]
    post.refresh_from_db()
    assert post.last_error == "the title is longer than 200 characters"


# --- the race: a cancel between the job's selection and its update ----------------------


def test_cancel_between_selection_and_update_wins(editor):
    """The job selected the post, then an editor cancelled: it must never be published."""
    victim = due_post(seconds_ago=20)
    other = due_post(seconds_ago=10)
    with transaction.atomic():
        now = database_now()
        rows = batches.select_due_publications(now=now, batch_size=10)
        assert {row.pk for row in rows} == {victim.pk, other.pk}
        posts.cancel_schedule(post=victim, user=editor)  # lands inside the window
        result = batches.publish_selected(rows=rows, now=now, node="node-a", batch_size=10)
    assert result.done == [other.pk]
    victim.refresh_from_db()
    assert victim.status == S.DRAFT
    assert victim.published_at is None
    assert kinds(victim) == [K.CANCELLED]
    assert batches.publish_due().done == []


def test_reschedule_between_selection_and_update_wins(editor):
    post = due_post(seconds_ago=20)
    later = database_now() + timedelta(hours=1)
    with transaction.atomic():
        now = database_now()
        rows = batches.select_due_publications(now=now, batch_size=10)
        posts.reschedule_post(post=post, publish_at=later, user=editor)
        result = batches.publish_selected(rows=rows, now=now, batch_size=10)
    assert result.done == []
    post.refresh_from_db()
    assert (post.status, post.publish_at, post.published_at) == (S.SCHEDULED, later, None)


def test_a_second_job_run_with_the_same_selection_publishes_nothing_twice():
    """A stale leader replaying a batch another replica already published changes nothing."""
    post = due_post()
    with transaction.atomic():
        now = database_now()
        rows = batches.select_due_publications(now=now, batch_size=10)
    batches.publish_due(node="node-a")
    replay = batches.publish_selected(rows=rows, now=database_now(), node="stale", batch_size=10)
    assert replay.done == []
    assert list(post.events.values_list("kind", "node")) == [(K.PUBLISHED, "node-a")]


# --- due unpublishes --------------------------------------------------------------------


def _selected_columns(queries: CaptureQueriesContext, order: str) -> str:
    """Return the select list of the one captured selection ordered by ``order`` first."""
    quote = connection.ops.quote_name
    ordered = f"ORDER BY {quote('publishing_post')}.{quote(order)}"
    (sql,) = [q["sql"] for q in queries.captured_queries if ordered in q["sql"]]
    return sql[: sql.index(" FROM ")]


def test_the_batches_selections_read_no_due_times_into_python():
    """A backlog batch's selection is 10,000 rows read in the leader's interpreter, beside the
    publish job's thread: only what the checks need, never a time to parse (the change
    computes lateness in the database)."""
    now = database_now()
    due_post(seconds_ago=30)
    make_post(status=S.PUBLISHED, unpublish_at=now - timedelta(seconds=3))
    with CaptureQueriesContext(connection) as queries:
        assert len(batches.publish_due().done) == 1
        assert len(batches.unpublish_due().done) == 1
    publish = _selected_columns(queries, "publish_at")
    unpublish = _selected_columns(queries, "unpublish_at")
    assert "title" in publish and "slug" in publish, publish
    assert "publish_at" not in publish, publish
    assert "unpublish_at" not in unpublish, unpublish


def test_unpublish_due_takes_posts_down_at_their_time():
    now = database_now()
    expired = make_post(
        status=S.PUBLISHED,
        publish_at=now - timedelta(hours=1),
        unpublish_at=now - timedelta(seconds=3),
    )
    still_live = make_post(status=S.PUBLISHED, unpublish_at=now + timedelta(hours=1))
    forever = make_post(status=S.PUBLISHED)
    result = batches.unpublish_due(node="node-b")
    assert result.done == [expired.pk]
    expired.refresh_from_db()
    assert expired.status == S.UNPUBLISHED
    event = expired.events.get()
    assert (event.kind, event.node) == (K.UNPUBLISHED, "node-b")
    assert event.lateness >= 3
    for post in (still_live, forever):
        post.refresh_from_db()
        assert post.status == S.PUBLISHED
    assert batches.unpublish_due().done == []


def test_unpublish_between_selection_and_update_is_not_recorded_twice(editor):
    now = database_now()
    post = make_post(status=S.PUBLISHED, unpublish_at=now - timedelta(seconds=1))
    with transaction.atomic():
        now = database_now()
        rows = batches.select_due_unpublications(now=now, batch_size=10)
        posts.unpublish_now(post=post, user=editor)
        result = batches.unpublish_selected(rows=rows, now=now, batch_size=10)
    assert result.done == []
    assert kinds(post) == [K.UNPUBLISHED]
