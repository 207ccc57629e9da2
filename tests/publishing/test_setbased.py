"""A batch of due posts changes in one set-based statement on PostgreSQL.

The posts' conditional ``UPDATE ... RETURNING`` feeds the events' ``INSERT`` in the same
statement; nothing about the guarantees changes: each post once, its version one higher, its
event's lateness measured by the database clock.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from coordination.clock import database_now
from publishing import batches, job_names
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import due_post, future_post, run_job

pytestmark = pytest.mark.django_db

S = Post.Status
K = PublishEvent.Kind


def writes(captured) -> list[str]:
    """Return the statements that write (a SELECT ... FOR UPDATE only locks)."""
    return [
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].lstrip().upper().startswith(("UPDATE", "INSERT", "WITH", "DELETE"))
    ]


def test_a_batch_publishes_each_post_once_with_its_version_and_lateness():
    due = [due_post(seconds_ago=s) for s in (30, 20, 10)]
    later = future_post()
    versions = {p.pk: p.version for p in due}
    result = batches.publish_due(node="node-s")
    assert result.done == [p.pk for p in due], "the latest first"
    for post in due:
        post.refresh_from_db()
        assert post.status == S.PUBLISHED
        assert post.version == versions[post.pk] + 1
        assert post.updated_by == "Scheduler (node node-s)"
        event = post.events.get()
        assert (event.kind, event.node) == (K.PUBLISHED, "node-s")
        assert event.data == {"version": post.version}  # the version the change wrote
        expected = (post.published_at - post.publish_at).total_seconds()
        assert event.lateness == pytest.approx(expected, abs=1e-3)
        assert event.at == post.published_at
    later.refresh_from_db()
    assert later.status == S.SCHEDULED
    assert batches.publish_due().done == [], "never twice"


@pytest.mark.postgresql
def test_on_postgresql_the_change_and_its_events_are_one_statement():
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement form is PostgreSQL's")
    due = [due_post(seconds_ago=s) for s in (3, 2, 1)]
    with CaptureQueriesContext(connection) as captured:
        result = batches.publish_due(node="node-s")
    assert len(result.done) == 3
    (statement,) = writes(captured)
    assert statement.lstrip().startswith("WITH changed AS (")
    assert "INSERT INTO" in statement
    assert PublishEvent.objects.filter(post__in=due, kind=K.PUBLISHED).count() == 3


def change_plan(batch_size: int) -> str:
    """Publish one batch; return PostgreSQL's plan for its change statement."""
    with CaptureQueriesContext(connection) as captured:
        assert len(batches.publish_due(batch_size=batch_size).done) == batch_size
    (statement,) = writes(captured)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {statement}")
        return "\n".join(row[0] for row in cursor.fetchall())


def many_posts(count: int, status: str) -> None:
    now = database_now()
    Post.objects.bulk_create(
        Post(
            title=f"Post {i}",
            slug=f"post-{i}",
            body="Body.",
            status=status,
            publish_at=now,
            published_at=now if status == S.PUBLISHED else None,
        )
        for i in range(count)
    )


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("statistics", ["fresh", "from before the backlog fell due"])
def test_on_postgresql_a_batch_looks_its_posts_up_by_primary_key_in_a_big_table(statistics):
    """The change reads only the batch's rows, by primary key, whatever the statistics say.

    A join to ``unnest(ids)`` was planned as a hash join over a sequential scan of every post
    once the table was big (40 ms of each 2,000-post batch at 100,000 posts). The due
    condition as index conditions, with statistics taken while few posts were scheduled,
    was planned as a walk of the due index (through every entry a drained backlog leaves).
    A transactional test: the table is truncated afterwards, which also resets the size
    that ``ANALYZE`` wrote (not undone by a rollback), so other tests' plans are their own.
    """
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement form is PostgreSQL's")
    if statistics == "fresh":
        many_posts(30_000, S.SCHEDULED)
        analyze_then = None
    else:
        many_posts(30_000, S.PUBLISHED)
        analyze_then = S.SCHEDULED
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE publishing_post")
    if analyze_then:
        Post.objects.update(status=analyze_then, published_at=None)
    plan = change_plan(2000 if statistics == "fresh" else 1)
    assert "Seq Scan on publishing_post" not in plan, plan
    assert "publishing_post_due" not in plan, plan
    assert "publishing_post_pkey" in plan, plan


@pytest.mark.django_db(transaction=True)
def test_the_publish_job_reads_the_clock_once_and_makes_no_savepoints():
    """A publish job run's three batches share its transaction and its clock reading.

    Each savepoint costs two round trips and each clock reading one: nine of a run's
    statements, which made every run (and so every on-time post) slower while a backlog drained.
    """
    post = due_post(seconds_ago=1)
    with CaptureQueriesContext(connection) as captured:
        run_job(job_names.PUBLISH_JOB, slot=post.publish_at)
    sql = [" ".join(q["sql"].upper().split()) for q in captured.captured_queries]
    assert not [s for s in sql if "SAVEPOINT" in s], sql
    clock_reads = [
        s for s in sql if s.startswith("SELECT") and " FROM " not in s and "PG_NOTIFY" not in s
    ]
    assert len(clock_reads) == 1, sql
    assert Post.objects.get(pk=post.pk).status == S.PUBLISHED


def test_a_batchs_events_are_not_checked_against_their_posts_by_the_database():
    """History needs no foreign key constraint: Django keeps ``post`` right on delete.

    The constraint re-checked each event's post at commit (0.8 s of a 100,000-post backlog);
    the index starting with ``post`` serves lookups by post, so it has no index of its own.
    """
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, PublishEvent._meta.db_table)
    on_post = {
        name: c for name, c in constraints.items() if c["columns"] and c["columns"][0] == "post_id"
    }
    assert not [name for name, c in on_post.items() if c["foreign_key"]], on_post
    if connection.vendor != "mysql":  # MySQL keeps the index it made for the old constraint
        assert [c["columns"] for c in on_post.values() if c["index"]] == [["post_id", "at"]]
    post = due_post(seconds_ago=1)
    batches.publish_due()
    post.delete()
    event = PublishEvent.objects.get(kind=K.PUBLISHED)
    assert event.post_id is None, "Django still sets a deleted post's events to no post"
