"""The publish job's agenda: what is due, read in one statement, and when it runs next.

:func:`publishing.agenda.next_run` is pure and tested with a table; the read is tested on
each database (its values converted as the ORM would), and a run's statement count with it.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from coordination.clock import database_now
from publishing import agenda, job_names
from publishing.agenda import LOCKED_RETRY, Agenda, next_run, read_agenda
from publishing.models import Post, PostRevision
from tests.publishing.conftest import due_post, future_post, make_post, run_job

S = Post.Status
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SOON = NOW + timedelta(minutes=5)
LATER = NOW + timedelta(hours=1)
PAST = NOW - timedelta(seconds=1)
WINDOW = timedelta(seconds=10)

NOTHING = Agenda()


@pytest.mark.parametrize(
    ("before", "after", "more", "held", "expected"),
    [
        pytest.param(NOTHING, NOTHING, False, False, None, id="nothing scheduled: sleep"),
        pytest.param(
            Agenda(publish=SOON), Agenda(publish=SOON), False, False, SOON, id="the next publish"
        ),
        pytest.param(
            Agenda(publish=SOON, unpublish=LATER, revision=LATER, others={"release": LATER}),
            Agenda(publish=SOON, unpublish=LATER, revision=LATER, others={"release": LATER}),
            False,
            False,
            SOON,
            id="the earliest of the four kinds",
        ),
        pytest.param(
            Agenda(publish=PAST),
            Agenda(publish=LATER, revision=SOON),
            False,
            False,
            SOON,
            id="after a run, its agenda as read after it",
        ),
        pytest.param(
            Agenda(publish=PAST),
            Agenda(publish=PAST),
            True,
            False,
            NOW,
            id="a full batch: at once",
        ),
        pytest.param(
            Agenda(publish=PAST),
            Agenda(publish=PAST),
            False,
            False,
            NOW + LOCKED_RETRY,
            id="still due after the run (its row was held): a second later",
        ),
        pytest.param(
            Agenda(others={"release": PAST}),
            Agenda(others={"release": LATER}),
            False,
            True,
            NOW + LOCKED_RETRY,
            id="a release's posts were held: a second later",
        ),
        pytest.param(
            Agenda(publish=SOON, backlog=True),
            Agenda(publish=SOON, backlog=True),
            False,
            False,
            SOON,
            id="the backlog is the backlog job's, not a reason to run",
        ),
    ],
)
def test_next_run(before, after, more, held, expected):
    assert next_run(before=before, after=after, now=NOW, more=more, held=held) == expected


@pytest.mark.parametrize(
    ("value", "due"),
    [(None, False), (LATER, False), (NOW, True), (PAST, True)],
)
def test_a_kind_is_due_at_or_after_its_time(value, due):
    assert Agenda(unpublish=value).due("unpublish", NOW) is due
    assert Agenda(unpublish=value).anything_due(NOW) is due


@pytest.mark.django_db
def test_the_agenda_is_read_in_one_statement_with_the_times_the_orm_would_read():
    now = database_now()
    assert not read_agenda(now=now, window=WINDOW).times()
    soon = future_post(seconds_ahead=60)
    future_post(seconds_ahead=600)
    due_post(seconds_ago=1)
    due_post(seconds_ago=1, last_error="the body is too long")  # failed: left out
    old = due_post(seconds_ago=3600)  # the backlog job's
    live = make_post(status=S.PUBLISHED, unpublish_at=now + timedelta(seconds=30))
    revision = PostRevision.objects.create(
        post=live,
        number=1,
        title="t",
        body="b",
        status=PostRevision.Status.SCHEDULED,
        publish_at=now + timedelta(seconds=90),
    )
    now = database_now()
    with CaptureQueriesContext(connection) as captured:
        read = read_agenda(now=now, window=WINDOW)
    assert len(captured.captured_queries) == 1
    stored = {p.pk: p for p in Post.objects.filter(pk__in=[soon.pk, old.pk, live.pk])}
    due = Post.objects.filter(status=S.SCHEDULED, last_error="", publish_at__gt=now - WINDOW)
    assert read.publish == due.order_by("publish_at").first().publish_at
    assert read.publish <= now < stored[soon.pk].publish_at
    assert read.unpublish == stored[live.pk].unpublish_at
    assert read.revision == PostRevision.objects.get(pk=revision.pk).publish_at
    assert read.others["release"] is None
    assert read.backlog is True
    assert read.publish.tzinfo is not None


@pytest.mark.django_db
def test_the_agenda_statement_is_compiled_once_per_database_and_run_with_each_reads_time():
    """Building and compiling the five querysets costs three times what their statement
    does; a read runs the statement compiled by the first, with its own time in it."""
    agenda._statements.clear()
    early = due_post(seconds_ago=1)
    now = database_now()
    assert read_agenda(now=now, window=WINDOW).publish == early.publish_at
    compiled = agenda._statement()
    assert compiled is not None, "the time's place in the statement was found"
    assert len(compiled.since_at) == 2
    # Later, the post is past the publish job's window: the backlog job's.
    later = read_agenda(now=now + 2 * WINDOW, window=WINDOW)
    assert (later.publish, later.backlog) == (None, True)
    assert agenda._statement() is compiled


@pytest.mark.django_db(transaction=True)
def test_a_run_for_one_due_post_reads_its_agenda_twice_and_looks_for_nothing_else():
    """No look for takedowns, revisions or releases when none is due: the agenda read before
    the change says so, and the one after it says when the job runs next."""
    future_post()
    post = due_post(seconds_ago=1)
    with CaptureQueriesContext(connection) as captured:
        next_due = run_job(job_names.PUBLISH_JOB, slot=post.publish_at)
    assert Post.objects.get(pk=post.pk).status == S.PUBLISHED
    sql = [" ".join(q["sql"].split()) for q in captured.captured_queries]
    agenda_reads = [s for s in sql if s.startswith("SELECT (SELECT")]
    others = [s for s in sql if not s.startswith("SELECT (SELECT")]
    assert len(agenda_reads) == 2, sql
    looks = [s for s in others if "publishing_postrevision" in s or "publishing_release" in s]
    assert not looks, looks
    assert not [s for s in others if "unpublish_at" in s and "FOR UPDATE" in s.upper()], others
    assert next_due == Post.objects.get(status=S.SCHEDULED).publish_at


@pytest.mark.django_db(transaction=True)
def test_a_run_with_nothing_due_reads_its_agenda_once():
    """A fallback run, or one woken for later: the clock and the agenda, nothing else."""
    later = future_post(seconds_ahead=600)
    with CaptureQueriesContext(connection) as captured:
        next_due = run_job(job_names.PUBLISH_JOB)
    sql = [" ".join(q["sql"].split()) for q in captured.captured_queries]
    reads = [s for s in sql if "publishing_" in s]
    assert len(reads) == 1 and reads[0].startswith("SELECT (SELECT"), sql
    assert next_due == later.publish_at


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_every_read_of_the_agenda_is_an_index_probe_in_a_big_table():
    """Each kind's first time is a probe of its own index, not a walk through another's.

    Unordered, the backlog's probe was planned as a walk of the newest-first index, filtering
    every published post (34 ms a run at 100,000 published posts, and a run per on-time post).
    A transactional test: the table is truncated afterwards, which also resets the statistics.
    """
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's plans")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO publishing_post (title, slug, body, body_html, excerpt, status,"
            " publish_at, published_at, created_at, updated_at, updated_by, last_error,"
            " version)"
            " SELECT 'Post', 'big-' || n, 'Body.', '', '', 'published',"
            " now() - interval '1 h', now(), now(), now(), '', '', 1"
            " FROM generate_series(1, 100000) AS n"
        )
        cursor.execute(
            "INSERT INTO publishing_post (title, slug, body, body_html, excerpt, status,"
            " publish_at, created_at, updated_at, updated_by, last_error, version)"
            " SELECT 'Post', 'soon-' || n, 'Body.', '', '', 'scheduled', now() + interval '1 h',"
            " now(), now(), '', '', 1 FROM generate_series(1, 100) AS n"
        )
        cursor.execute("ANALYZE publishing_post")
    now = database_now()
    with CaptureQueriesContext(connection) as captured:
        read_agenda(now=now, window=WINDOW)
    (query,) = captured.captured_queries
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {query['sql']}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "publishing_post_recent" not in plan, plan
    assert "Seq Scan on publishing_post " not in plan, plan
    assert plan.count("Index Cond") == 5, plan
