"""The run-ledger admin's trigger and status filters are one index range in the list's order.

At a million rows ``?trigger=manual`` (one run in a thousand) walked the ``(-slot, -id)``
index until a page of manual runs turned up (~1 s); ``(trigger, -slot, -id)`` and
``(status, -slot, -id)`` (migration 0009) make each filtered page one range scan, no sort.
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from coordination.clock import database_now
from coordination.models import JobRun, JobState

pytestmark = [pytest.mark.django_db, pytest.mark.postgresql]

URL = reverse("admin:coordination_jobrun_changelist")


def page_plan(admin_client, query: str) -> str:
    """Return PostgreSQL's plan of the query that reads the page's rows."""
    with CaptureQueriesContext(connection) as captured:
        assert admin_client.get(URL + query).status_code == 200
    (rows,) = [
        q["sql"]
        for q in captured.captured_queries
        if "coordination_jobrun" in q["sql"] and "ORDER BY" in q["sql"] and "COUNT(" not in q["sql"]
    ]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + rows)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("?trigger=manual", "coordination_jobrun_trig"),
        ("?status=failed", "coordination_jobrun_state"),
    ],
)
def test_a_filtered_page_is_one_index_range_in_the_lists_order(admin_client, query, index):
    now = database_now()
    JobState.objects.create(name="demo.busy", group="plugins")
    JobRun.objects.bulk_create(
        JobRun(
            job="demo.busy",
            slot=now - timedelta(minutes=i),
            status=JobRun.Status.FAILED if i % 1000 == 7 else JobRun.Status.SUCCEEDED,
            trigger=JobRun.Trigger.MANUAL if i % 1000 == 3 else JobRun.Trigger.SCHEDULE,
        )
        for i in range(30_000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE coordination_jobrun")
    plan = page_plan(admin_client, query)
    assert index in plan, plan
    assert "Sort" not in plan, plan
