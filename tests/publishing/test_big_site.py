"""Pages that stay fast at 100,000 posts and a million events.

What makes them fast is checked here by its shape, not by timing (the benchmark in
``bench/bigsite.py`` times them): nothing counts or scans a whole table, and on PostgreSQL
each list's page is read from an index that matches its order (no sort in the plan).
"""

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from coordination.admin_paging import CappedCountPaginator
from publishing import posts
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import make_post
from tests.publishing.test_index_paging import id_base

pytestmark = pytest.mark.django_db

S = Post.Status
K = PublishEvent.Kind
POSTS = reverse("admin:publishing_post_changelist")
EVENTS = reverse("admin:publishing_publishevent_changelist")
ADMIN_LISTS = [
    POSTS,
    f"{POSTS}?status__exact=published",
    f"{POSTS}?failed=yes",
    EVENTS,
    f"{EVENTS}?kind__exact=published",
    f"{EVENTS}?within=24h",
]


def some_history(count: int = 3) -> None:
    for i in range(count):
        post = make_post(status=S.PUBLISHED, slug=f"p-{i}")
        PublishEvent.objects.create(post=post, kind=K.PUBLISHED, lateness=0.01)


def queries_of(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return [q["sql"] for q in captured.captured_queries]


@pytest.mark.parametrize("url", ADMIN_LISTS)
def test_the_admin_lists_never_count_or_scan_a_whole_table(admin_client, url):
    some_history()
    for sql in queries_of(admin_client, url):
        upper = sql.upper()
        assert "DISTINCT" not in upper, f"a date hierarchy's scan: {sql}"
        if "COUNT(" in upper and ("PUBLISHING_POST" in upper or "PUBLISHING_PUBLISHEVENT" in upper):
            assert "LIMIT" in upper, f"a count of every row: {sql}"


@pytest.mark.parametrize(("url", "name"), [(POSTS, "posts"), (EVENTS, "publish history")])
def test_past_the_cap_the_lists_say_more_than(admin_client, monkeypatch, url, name):
    monkeypatch.setattr(CappedCountPaginator, "cap", 2)
    some_history(3)
    text = admin_client.get(url).content.decode()
    assert f"more than 2 {name}" in text


def test_the_public_index_never_counts_the_live_posts(client, settings):
    settings.INSTATIC_POSTS_PER_PAGE = 2
    base = id_base(2)
    for i in range(6):  # breaks (multiples of 2): live-0, live-2, live-4
        make_post(id=base + i, status=S.PUBLISHED, slug=f"live-{i}")
    for url, links in [("/", ["Older posts"]), ("/?from=live-0", ["Newer posts"])]:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        assert response.status_code == 200
        text = response.content.decode()
        for link in links:
            assert link in text
        assert not any("COUNT(" in q["sql"].upper() for q in captured.captured_queries)
        assert not any("OFFSET" in q["sql"].upper() for q in captured.captured_queries)
    assert "Older posts" not in client.get("/?from=live-0").content.decode(), "the last page"
    for page in ("5", "0", "x"):
        assert client.get(f"/?page={page}").status_code == 404, page


def test_deleting_a_live_post_without_history_changes_the_public_validators(client, admin_user):
    make_post(status=S.PUBLISHED, slug="stays")
    goes = make_post(status=S.PUBLISHED, slug="goes")  # no events: made live by a script
    first = client.get("/")
    posts.delete_post(post=goes, user=admin_user)
    assert client.get("/", headers={"if-none-match": first["ETag"]}).status_code == 200
    event = PublishEvent.objects.get(kind=K.DELETED)
    assert event.data == {"slug": "goes", "was": S.PUBLISHED, "post": goes.pk}


def test_deleting_a_draft_without_history_leaves_no_trace(admin_user):
    posts.delete_post(post=make_post(slug="scratch"), user=admin_user)
    assert not PublishEvent.objects.exists()


# --- PostgreSQL: each page is an index range scan in its own order -----------------------


def plan(sql: str) -> str:
    """Return PostgreSQL's plan for ``sql`` where any plan without a sequential scan or a
    sort wins: costs on a test's few rows (and on the statistics earlier tests left) are
    arbitrary, and the question is whether an index gives the query its order."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


def page_queries(client, url: str, table: str) -> list[str]:
    """Return the queries of ``url`` that read a page (2 rows, see below) of ``table``."""
    return [
        sql
        for sql in queries_of(client, url)
        if sql.startswith("SELECT ")
        and f' FROM "{table}"' in sql
        and sql.rstrip().endswith("LIMIT 2")
    ]


@pytest.mark.postgresql
@pytest.mark.parametrize(
    ("url", "table"),
    [
        (POSTS, "publishing_post"),
        (EVENTS, "publishing_publishevent"),
        (f"{EVENTS}?kind__exact=published", "publishing_publishevent"),
        (f"{EVENTS}?within=24h", "publishing_publishevent"),
    ],
)
def test_on_postgresql_a_list_page_is_read_in_index_order(admin_client, monkeypatch, url, table):
    if connection.vendor != "postgresql":
        pytest.skip("plans are PostgreSQL's")
    for model in (Post, PublishEvent):
        monkeypatch.setattr(admin.site._registry[model], "list_per_page", 2)
    some_history(3)
    (sql,) = page_queries(admin_client, url, table)
    explained = plan(sql)
    assert "Sort" not in explained, explained
    assert "Index" in explained, explained


@pytest.mark.postgresql
def test_on_postgresql_the_public_validators_are_index_probes():
    if connection.vendor != "postgresql":
        pytest.skip("plans are PostgreSQL's")
    from publishing import selectors

    some_history()
    base = id_base(2)
    for i in range(6):
        make_post(id=base + i, status=S.PUBLISHED, slug=f"keyed-{i}")
    with CaptureQueriesContext(connection) as captured:
        selectors.live_version()
        page = selectors.index_page(key=selectors.FRONT, per_page=2, link=str)
        assert page.older is not None
        selectors.index_page(key=page.older, per_page=2, link=str)
    for query in captured.captured_queries:
        explained = plan(query["sql"])
        assert "Sort" not in explained and "Aggregate" not in explained, explained
