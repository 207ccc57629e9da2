"""The run-ledger admin stays one index range scan per page however big the ledger grows."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from coordination import admin_paging
from coordination.admin import JobRunAdmin
from coordination.clock import database_now
from coordination.models import JobRun, JobState

pytestmark = pytest.mark.django_db

URL = reverse("admin:coordination_jobrun_changelist")


def ledger(job: str, count: int, *, hours_apart: float = 1, **values) -> None:
    now = database_now()
    JobRun.objects.bulk_create(
        JobRun(
            job=job,
            slot=now - timedelta(hours=(i + 0.5) * hours_apart),
            status=values.get("status", JobRun.Status.SUCCEEDED),
        )
        for i in range(count)
    )
    JobState.objects.get_or_create(name=job, defaults={"group": "plugins"})


def jobrun_queries(queries) -> list[str]:
    return [q["sql"] for q in queries if "coordination_jobrun" in q["sql"]]


def test_no_query_of_the_run_list_scans_or_counts_the_whole_ledger(admin_client):
    ledger("demo.a", 30)
    ledger("demo.b", 30)
    for query in ("", "?job=demo.a", "?status=failed", "?within=24h", "?trigger=manual&job=demo.b"):
        with CaptureQueriesContext(connection) as captured:
            response = admin_client.get(URL + query)
        assert response.status_code == 200
        ledger_sql = jobrun_queries(captured.captured_queries)
        assert not [sql for sql in ledger_sql if "DISTINCT" in sql.upper()], query
        counts = [sql for sql in ledger_sql if "COUNT(" in sql.upper()]
        assert len(counts) == 1, f"one count, not a second full one: {counts}"
        assert "LIMIT" in counts[0].upper(), f"the count stops at a cap: {counts[0]}"


def test_the_job_filter_lists_the_jobs_from_their_state_and_filters_by_one(admin_client):
    ledger("demo.a", 3)
    ledger("demo.b", 2)
    JobState.objects.create(name="demo.never-ran", group="plugins")
    page = admin_client.get(URL).content.decode()
    for name in ("demo.a", "demo.b", "demo.never-ran"):
        assert f"?job={name}" in page
    filtered = admin_client.get(URL + "?job=demo.b")
    assert [run.job for run in filtered.context["cl"].result_list] == ["demo.b", "demo.b"]


def test_the_slot_window_filter_keeps_recent_slots_by_the_database_clock(admin_client):
    ledger("demo.a", 48)  # one an hour, the newest half an hour ago
    day = admin_client.get(URL + "?within=24h").context["cl"].result_list
    assert len(day) == 24 and all(run.slot >= database_now() - timedelta(days=1) for run in day)
    assert len(admin_client.get(URL + "?within=7d").context["cl"].result_list) == 48


def test_the_count_stops_at_its_cap_and_says_more_than(admin_client, monkeypatch):
    monkeypatch.setattr(admin_paging.CappedCountPaginator, "cap", 5)
    ledger("demo.a", 8)
    page = admin_client.get(URL).content.decode()
    assert "more than 5 job runs" in page
    page = admin_client.get(URL + "?within=1h").content.decode()
    assert "1 job run" in page and "more than" not in page


def test_the_lists_order_is_an_index_and_newest_first(admin_client):
    ledger("demo.a", 3)
    ledger("demo.b", 3, hours_apart=1.5)
    indexes = [tuple(index.fields) for index in JobRun._meta.indexes]
    assert tuple(JobRunAdmin.ordering) in indexes
    assert ("job", "-slot") in indexes, "one job's page: the (job, -slot) index"
    runs = admin_client.get(URL).context["cl"].result_list
    assert [run.slot for run in runs] == sorted((run.slot for run in runs), reverse=True)
