"""The sitemap: an index of paged sections that reaches every live post, fast at any size."""

from datetime import timedelta
from urllib.parse import urlsplit
from xml.etree import ElementTree

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.http import http_date

from coordination.clock import database_now
from publishing import posts, selectors
from publishing.models import Post
from publishing.sitemaps import PostSitemap
from tests.publishing.conftest import due_post, future_post, make_post

pytestmark = pytest.mark.django_db

S = Post.Status
SITEMAP = reverse("publishing:sitemap")
POSTS = reverse("publishing:sitemap_section", kwargs={"section": "posts"})
NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


@pytest.fixture
def page_size(monkeypatch):
    """Three posts a sitemap page, so a handful of posts spans several pages."""
    monkeypatch.setattr(PostSitemap, "limit", 3)
    return 3


def locations(response) -> list[str]:
    assert response.status_code == 200
    return [loc.text for loc in ElementTree.fromstring(response.content).iter(f"{NS}loc")]


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def listed_posts(client) -> list[str]:
    """Return the post URLs of every page the sitemap index lists, in order, repeats kept."""
    listed = []
    for page in locations(client.get(SITEMAP)):
        listed += [path_of(loc) for loc in locations(client.get(path_of(page)))]
    return [url for url in listed if url.startswith("/posts/")]


def live(*ids: int) -> list[Post]:
    """Live posts with the given ids (pages are ranges of ids; a sequence need not start at 1)."""
    return [make_post(id=pk, status=S.PUBLISHED, slug=f"live-{pk}") for pk in ids]


def hidden_post(kind: int, pk: int) -> Post:
    """A post the public must not see: draft, scheduled, overdue, unpublished or expired."""
    now = database_now()
    slug = f"hidden-{pk}"
    return [
        lambda: make_post(id=pk, slug=slug),
        lambda: future_post(id=pk, slug=slug),
        lambda: due_post(id=pk, slug=slug),
        lambda: make_post(id=pk, status=S.UNPUBLISHED, slug=slug, published_at=now),
        lambda: make_post(id=pk, status=S.PUBLISHED, slug=slug, unpublish_at=now),
    ][kind % 5]()


def live_and_hidden_posts() -> list[Post]:
    """Live posts (odd ids) with every kind of hidden post between them; the live ones."""
    posts = []
    for i in range(8):
        posts += live(2 * i + 1)
        hidden_post(i, 2 * i + 2)
    return posts


def test_every_live_post_is_listed_exactly_once_across_the_pages(client, page_size):
    posts = live_and_hidden_posts()
    pages = [path_of(loc) for loc in locations(client.get(SITEMAP))]
    last_page = (15 - 1) // page_size + 1
    assert last_page == 5, "the posts span several pages"
    assert pages == [
        reverse("publishing:sitemap_section", kwargs={"section": "pages"}),
        POSTS,
        *(f"{POSTS}?p={n}" for n in range(2, last_page + 1)),
    ]
    listed = listed_posts(client)
    assert len(listed) == len(set(listed)), "no post twice"
    assert sorted(listed) == sorted(p.get_absolute_url() for p in posts)
    for number in range(1, last_page + 1):
        assert len(locations(client.get(POSTS, {"p": number}))) <= page_size


def test_a_post_stays_on_its_page_when_others_come_and_go(client, page_size, editor):
    shown = live(*range(1, 8))
    page = f"{POSTS}?p=3"  # ids 7..9
    assert [path_of(u) for u in locations(client.get(page))] == ["/posts/live-7/"]
    posts.unpublish_now(post=shown[0], user=editor)
    make_post(id=8, status=S.PUBLISHED, slug="newer")
    assert [path_of(u) for u in locations(client.get(page))] == ["/posts/live-7/", "/posts/newer/"]
    assert shown[0].get_absolute_url() not in listed_posts(client)
    assert len(listed_posts(client)) == 7


@pytest.mark.parametrize(
    "number", ["x", "", "0", "-1", "1.5", "1e3", "99999999999999999999", "9" * 5000, "3"]
)
def test_a_page_number_that_is_not_a_page_is_404(client, page_size, number):
    live(1, 2, 3, 4)  # pages 1 and 2
    assert client.get(POSTS, {"p": "2"}).status_code == 200
    assert client.get(POSTS, {"p": number}).status_code == 404


def test_unknown_sections_and_pages_past_a_small_section_are_404(client):
    live(1)
    assert client.get(POSTS, {"p": "1"}).status_code == 200
    pages = reverse("publishing:sitemap_section", kwargs={"section": "pages"})
    assert client.get(pages).status_code == 200
    assert client.get(pages, {"p": "2"}).status_code == 404
    assert client.get("/sitemap-nope.xml").status_code == 404


def test_a_site_without_live_posts_has_an_empty_first_page(client):
    make_post(slug="only-a-draft")
    assert locations(client.get(POSTS)) == []
    assert client.get(POSTS, {"p": "2"}).status_code == 404


def test_a_page_says_it_changed_when_a_post_left_it(client, page_size, editor):
    """Last-Modified of a page is the site's latest change, which a post leaving moves."""
    shown = live(1, 2, 3)
    long_ago = database_now() - timedelta(days=3)
    Post.objects.filter(pk__in=[p.pk for p in shown]).update(updated_at=long_ago)
    posts.unpublish_now(post=shown[1], user=editor)
    left = selectors.live_version().last_change
    assert left > long_ago + timedelta(days=1)
    response = client.get(POSTS)
    assert response["Last-Modified"] == http_date(left.timestamp())
    assert client.get(SITEMAP)["Last-Modified"] == http_date(left.timestamp())


def test_no_request_counts_or_skips_the_live_posts(client, page_size):
    live(*range(1, 8))
    for url in (SITEMAP, POSTS, f"{POSTS}?p=2"):
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        for query in captured.captured_queries:
            sql = query["sql"].upper()
            assert "COUNT(" not in sql and "OFFSET" not in sql, query["sql"]


@pytest.mark.postgresql
def test_on_postgresql_a_page_is_read_by_index_ranges_without_a_sort(client, page_size):
    if connection.vendor != "postgresql":
        pytest.skip("plans are PostgreSQL's")
    live(*range(1, 8))
    make_post(id=8, status=S.PUBLISHED, slug="going", unpublish_at=database_now() + timedelta(1))
    with CaptureQueriesContext(connection) as captured:
        assert client.get(POSTS, {"p": "2"}).status_code == 200
    reads = [q["sql"] for q in captured.captured_queries if '"publishing_post"."id"' in q["sql"]]
    assert len(reads) == 3, "the highest live id (two probes), the page"
    for sql in reads:
        with connection.cursor() as cursor:
            # Costs on a test's few rows (and on the statistics earlier tests left) are
            # arbitrary: the question is whether an index gives this order, so a plan that
            # can do without a sort or a sequential scan must.
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_sort = off")
            cursor.execute(f"EXPLAIN {sql}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "Sort" not in plan and "Index" in plan, plan
