"""A batch of due posts changes in one set-based statement on PostgreSQL (issue 16 row 1).

The posts' conditional ``UPDATE ... RETURNING`` feeds the events' ``INSERT`` in the same
statement; nothing about the guarantees changes: each post once, its version one higher, its
event's lateness measured by the database clock.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from publishing import services
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import due_post, future_post

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
    result = services.publish_due(node="node-s")
    assert result.done == [p.pk for p in due], "the latest first"
    for post in due:
        post.refresh_from_db()
        assert post.status == S.PUBLISHED
        assert post.version == versions[post.pk] + 1
        assert post.updated_by == "the scheduler (node-s)"
        event = post.events.get()
        assert (event.kind, event.node, event.data) == (K.PUBLISHED, "node-s", {})
        expected = (post.published_at - post.publish_at).total_seconds()
        assert event.lateness == pytest.approx(expected, abs=1e-3)
        assert event.at == post.published_at
    later.refresh_from_db()
    assert later.status == S.SCHEDULED
    assert services.publish_due().done == [], "never twice"


@pytest.mark.postgresql
def test_on_postgresql_the_change_and_its_events_are_one_statement():
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement form is PostgreSQL's")
    due = [due_post(seconds_ago=s) for s in (3, 2, 1)]
    with CaptureQueriesContext(connection) as captured:
        result = services.publish_due(node="node-s")
    assert len(result.done) == 3
    (statement,) = writes(captured)
    assert statement.lstrip().startswith("WITH changed AS (")
    assert "INSERT INTO" in statement
    assert PublishEvent.objects.filter(post__in=due, kind=K.PUBLISHED).count() == 3
