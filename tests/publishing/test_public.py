"""The public site: only live posts exist anywhere, bodies are safe, pages are cacheable."""

import html
import re
from datetime import timedelta
from html.parser import HTMLParser
from urllib.parse import urlsplit
from xml.etree import ElementTree

import pytest
from django.test import override_settings
from django.urls import reverse

from coordination.clock import database_now
from publishing import batches, posts
from publishing.models import Post
from tests.publishing.conftest import due_post, future_post, make_post

pytestmark = pytest.mark.django_db

S = Post.Status
INDEX = reverse("publishing:index")
FEED = reverse("publishing:feed")
SITEMAP = reverse("publishing:sitemap")
ATOM = "{http://www.w3.org/2005/Atom}"
SITEMAP_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


def feed_entries(client) -> list[dict]:
    response = client.get(FEED)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/atom+xml")
    root = ElementTree.fromstring(response.content)
    return [
        {
            "title": entry.findtext(f"{ATOM}title"),
            "link": entry.find(f"{ATOM}link").get("href"),
            "content": entry.findtext(f"{ATOM}summary") or entry.findtext(f"{ATOM}content"),
        }
        for entry in root.iter(f"{ATOM}entry")
    ]


def _locations(client, url: str) -> list[str]:
    response = client.get(url)
    assert response.status_code == 200
    root = ElementTree.fromstring(response.content)
    return [loc.text for loc in root.iter(f"{SITEMAP_NS}loc")]


def sitemap_locations(client) -> list[str]:
    """Return the URLs of every page of every section the sitemap index lists."""
    locations = []
    for page in _locations(client, SITEMAP):
        parts = urlsplit(page)
        locations += _locations(client, f"{parts.path}?{parts.query}")
    return locations


def not_live_posts() -> dict[str, Post]:
    """One post in every state that must not be visible."""
    now = database_now()
    failed = due_post(title="", slug="failed-post")
    batches.publish_due()
    return {
        "draft": make_post(slug="a-draft"),
        "scheduled": future_post(slug="a-scheduled-post"),
        "overdue": due_post(slug="overdue-not-yet-published"),
        "failed": failed,
        "unpublished": make_post(
            status=S.UNPUBLISHED, slug="an-unpublished-post", published_at=now
        ),
        "expired": make_post(
            status=S.PUBLISHED, slug="expired-but-not-yet-taken-down", unpublish_at=now
        ),
    }


def test_live_posts_appear_everywhere(client):
    post = make_post(status=S.PUBLISHED, title="Hello world", slug="hello-world")
    page = client.get(post.get_absolute_url())
    assert page.status_code == 200
    assert "Hello world" in page.content.decode()
    assert "Hello world" in client.get(INDEX).content.decode()
    assert [e["title"] for e in feed_entries(client)] == ["Hello world"]
    assert any(loc.endswith("/posts/hello-world/") for loc in sitemap_locations(client))


@pytest.mark.parametrize(
    "state", ["draft", "scheduled", "overdue", "failed", "unpublished", "expired"]
)
def test_posts_that_are_not_live_are_404_and_absent_everywhere(client, state):
    make_post(status=S.PUBLISHED, slug="the-live-one", title="The live one")
    post = not_live_posts()[state]
    # A post of a non-live state has the same slug-shaped URL as a live one; it must 404.
    assert client.get(reverse("publishing:post_detail", args=[post.slug])).status_code == 404
    index = client.get(INDEX).content.decode()
    assert post.slug not in index and "The live one" in index
    assert [e["title"] for e in feed_entries(client)] == ["The live one"]
    locations = sitemap_locations(client)
    assert not any(post.slug in loc for loc in locations)
    assert any("the-live-one" in loc for loc in locations)


def test_an_unknown_slug_is_404(client):
    assert client.get(reverse("publishing:post_detail", args=["nope"])).status_code == 404


def test_the_index_is_newest_first_and_paginated(client):
    now = database_now()
    for i in range(12):
        make_post(
            status=S.PUBLISHED,
            title=f"Number {i:02d}",
            published_at=now - timedelta(minutes=60 - i),
        )
    with override_settings(INSTATIC_POSTS_PER_PAGE=5):
        first = client.get(INDEX).content.decode()
        rest, page = "", first
        while older := re.search(r'rel="next" href="([^"]+)"', page):
            page = client.get(html.unescape(older.group(1))).content.decode()
            rest += page
        assert client.get(INDEX, {"page": 4}).status_code == 404, "no post 16th from the top"
        assert client.get(INDEX, {"page": "x"}).status_code == 404
    # Which posts start the later pages depends on ids (publishing.paging); the front page
    # holds at least a page, newest first, and the "Older posts" links go on from there.
    titles = [f"Number {i:02d}" for i in range(11, 6, -1)]
    positions = [first.index(t) for t in titles]
    assert positions == sorted(positions), "newest first"
    both = re.findall(r"Number (\d\d)", first + rest)
    assert both == sorted(both, reverse=True) and len(set(both)) == len(both)
    assert "Number 11" in first and "Number 00" in first + rest


XSS_TITLE = '<script>alert("title")</script><img src=x onerror=alert(1)>'
XSS_BODY = "\n\n".join(
    [
        "Innocent *intro*.",
        "<script>alert('body')</script>",
        '<img src="x" onerror="alert(2)">',
        "[click me](javascript:alert(3))",
        '<a href="javascript:alert(4)">raw link</a>',
        '<iframe src="https://evil.example"></iframe>',
        '<p style="background:url(javascript:alert(5))" onclick="alert(6)">styled</p>',
        "<svg onload=alert(7)></svg>",
    ]
)


class _ActiveContent(HTMLParser):
    """Collect what a browser would run: script-ish tags, event handlers, script URLs."""

    DANGEROUS_TAGS = {"script", "iframe", "svg", "object", "embed", "style", "form"}

    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self.in_head = False

    def handle_starttag(self, tag, attrs):
        if tag == "head":
            self.in_head = True
        if tag in self.DANGEROUS_TAGS and not (tag == "style" and self.in_head):
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"{tag} {name}=")
            if name in ("href", "src", "style") and "javascript:" in (value or "").lower():
                self.found.append(f"{tag} {name}={value}")

    def handle_endtag(self, tag):
        if tag == "head":
            self.in_head = False


def assert_inert(markup: str) -> None:
    parser = _ActiveContent()
    parser.feed(markup)
    assert parser.found == [], f"active content survived: {parser.found}"


def test_script_injection_through_title_or_body_is_inert(client):
    post = make_post(status=S.PUBLISHED, title=XSS_TITLE, slug="xss", body=XSS_BODY)
    detail = client.get(post.get_absolute_url()).content.decode()
    index = client.get(INDEX).content.decode()
    for page in (detail, index):
        assert_inert(page)
        assert html.escape(XSS_TITLE, quote=False).replace('"', "&quot;") in page
    assert "<em>intro</em>" in detail, "Markdown is still rendered"
    (entry,) = feed_entries(client)
    assert entry["title"] == XSS_TITLE, "the feed title is text, not markup"
    assert_inert(entry["content"])
    assert "<em>intro</em>" in entry["content"]


def test_pages_answer_conditional_requests(client):
    post = make_post(status=S.PUBLISHED, slug="cached")
    for url in (INDEX, post.get_absolute_url(), FEED, SITEMAP):
        first = client.get(url)
        assert first.status_code == 200
        assert first.has_header("ETag"), url
        assert first.has_header("Last-Modified"), url
        again = client.get(url, headers={"if-none-match": first["ETag"]})
        assert again.status_code == 304, url


def test_etags_change_when_the_live_set_changes(client, editor):
    post = make_post(status=S.PUBLISHED, slug="first")
    index_etag = client.get(INDEX)["ETag"]
    post_etag = client.get(post.get_absolute_url())["ETag"]
    other = make_post()
    posts.publish_now(post=other, user=editor)
    response = client.get(INDEX, headers={"if-none-match": index_etag})
    assert response.status_code == 200, "a newly live post changes the index"
    index_etag = response["ETag"]
    posts.unpublish_now(post=other, user=editor)
    assert client.get(INDEX, headers={"if-none-match": index_etag}).status_code == 200
    post.body = "edited"
    posts.save_post(post=post, user=editor)
    assert (
        client.get(post.get_absolute_url(), headers={"if-none-match": post_etag}).status_code == 200
    )


def test_a_body_that_fails_to_render_is_shown_as_text(client, editor):
    post = make_post(status=S.PUBLISHED, slug="broken", body="ok")
    post.body = "<b>" * 200  # nested too deep to render; the admin form refuses it
    posts.save_post(post=post, user=editor)
    page = client.get(post.get_absolute_url())
    assert page.status_code == 200
    assert "&lt;b&gt;&lt;b&gt;" in page.content.decode()
