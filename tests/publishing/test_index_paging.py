"""The public index's pages: cut at break posts (``publishing.paging``), the same in the view
and the static export, with the old page numbers redirected."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordination.clock import database_now
from publishing import paging, selectors
from publishing.models import Post
from tests.publishing.conftest import make_post

INDEX = reverse("publishing:index")


def ids(pages) -> list[list[int]]:
    return [[row[0] for row in page] for page in pages]


def rows(*post_ids: int) -> list[tuple[int]]:
    return [(pk,) for pk in post_ids]


@pytest.mark.parametrize(
    ("post_ids", "newer", "expected"),
    [
        # Nothing live: the front page, empty.
        ([], 0, [[]]),
        # Fewer than a page: the front page only, breaks or not.
        ([6, 4, 3], 0, [[6, 4, 3]]),
        # Posts live in the order they were written: pages of exactly 3 below the front page,
        # which runs to the first break (a multiple of 3) at least 3 posts from the top.
        (range(14, 0, -1), 0, [[14, 13, 12, 11, 10], [9, 8, 7], [6, 5, 4], [3, 2, 1]]),
        # The front page holds at least a page: break 12 is within the first 3 posts.
        (range(13, 0, -1), 0, [[13, 12, 11, 10], [9, 8, 7], [6, 5, 4], [3, 2, 1]]),
        # Out of order: pages as long as the gap between breaks.
        ([20, 19, 18, 17, 9, 8, 7, 5, 3, 1], 0, [[20, 19, 18, 17], [9, 8, 7, 5], [3, 1]]),
        # No break below the front page: one long page.
        ([1, 2, 4, 5, 7, 8, 10, 11], 0, [[1, 2, 4, 5, 7, 8, 10, 11]]),
        # Rows from a page's first post (the view's ?from=): that page, then the rest.
        ([9, 8, 7, 6, 5, 4], 3, [[9, 8, 7], [6, 5, 4]]),
        # Rows from a post that starts no page: they make a page of their own up to a break.
        ([8, 7, 6, 5], 3, [[8, 7], [6, 5]]),
    ],
)
def test_pages_are_cut_at_break_posts_below_the_front_page(post_ids, newer, expected):
    assert ids(paging.pages(rows(*post_ids), per_page=3, newer=newer)) == expected


@pytest.mark.parametrize(
    ("change", "before", "after", "touched"),
    [
        # Unpublish from the middle (not a break): its own page only.
        ("unpublish 5", range(14, 0, -1), [14, 13, 12, 11, 10, 9, 8, 7, 6, 4, 3, 2, 1], 1),
        # Unpublish a break: its page joins the one above.
        ("unpublish 6", range(14, 0, -1), [14, 13, 12, 11, 10, 9, 8, 7, 5, 4, 3, 2, 1], 1),
        # Unpublish the oldest: the last page only.
        ("unpublish 1", range(14, 0, -1), range(14, 1, -1), 1),
        # Publish a new post on top: the front page, and the page it hands over (12 11 10).
        ("publish 15", range(14, 0, -1), range(15, 0, -1), 2),
        ("publish 16", range(15, 0, -1), range(16, 0, -1), 1),
        # Publish a break in the middle (a post back from unpublished, once more live).
        ("publish 6", [9, 8, 7, 5, 4, 3], [9, 8, 7, 6, 5, 4, 3], 2),
    ],
)
def test_one_change_anywhere_moves_only_the_pages_around_it(change, before, after, touched):
    old = ids(paging.pages(rows(*before), per_page=3))
    new = ids(paging.pages(rows(*after), per_page=3))
    # Pages are known by their first post (the front page by being first); what changed:
    old_pages = {(i == 0 or page[0], tuple(page)) for i, page in enumerate(old)}
    new_pages = {(i == 0 or page[0], tuple(page)) for i, page in enumerate(new)}
    assert len(new_pages - old_pages) <= touched, (change, old, new)


@pytest.mark.parametrize(
    ("text", "number"),
    [
        (None, 1),
        ("", 1),
        ("1", 1),
        ("2", 2),
        ("007", 7),
        ("9" * 15, int("9" * 15)),
        ("9" * 16, None),
        ("0", None),
        ("-1", None),
        ("+1", None),
        (" 1", None),
        ("1 ", None),
        ("\u00b2", None),
        ("\u0663", None),
        ("\uff11", None),
        ("1e3", None),
        ("x", None),
    ],
)
def test_a_page_number_is_ascii_digits_from_1(text, number):
    assert paging.page_number(text) == number


# --- the view -------------------------------------------------------------------------------


#: On PostgreSQL, ids left free above the last one handed out, for the posts a test makes
#: through the sequence beside the ones it makes with explicit ids.
COUNTER_ROOM = 100


def id_base(multiple: int) -> int:
    """Return the first multiple of ``multiple`` above every id the database handed out.

    Posts made with ids ``base + n`` are break posts where n is a multiple of the page size.
    PostgreSQL's sequence does not move past an explicit id, so there ``COUNTER_ROOM`` more
    ids are left free for the posts a test makes through the sequence. Elsewhere the counter
    moves past explicit ids by itself, and the base stays just above the ids handed out, not
    far: MariaDB's AUTO_INCREMENT moves up to an explicit id and never back, and the
    sitemap's pages are ranges of ids.
    """
    probe = make_post()
    pk = probe.pk
    probe.delete()
    room = COUNTER_ROOM if connection.vendor == "postgresql" else 0
    return ((pk + room) // multiple + 1) * multiple


@pytest.fixture
def base(db) -> int:
    """An id base that is a multiple of every page size these tests use (1 to 6)."""
    return id_base(60)


def publish(base: int, post_ids, *, start=None) -> list[Post]:
    """Make live posts with ids base + n, each published a minute after the one before."""
    start = start or database_now() - timedelta(days=1)
    return [
        make_post(
            id=base + n,
            slug=f"p{n}",
            title=f"Number {n}",
            status=Post.Status.PUBLISHED,
            published_at=start + timedelta(minutes=i),
        )
        for i, n in enumerate(post_ids)
    ]


def expected_pages(per_page: int) -> list[list[str]]:
    live = selectors.live_posts().values_list("id", "slug")
    return [[slug for _pk, slug in page] for page in paging.pages(live, per_page=per_page)]


def walk(client) -> list[list[str]]:
    """Follow "Older posts" from the front page to the end; return each page's slugs."""
    import re

    seen, url = [], INDEX
    while url:
        response = client.get(url)
        assert response.status_code == 200, url
        text = response.content.decode()
        seen.append(re.findall(r'href="/posts/([\w-]+)/"', text))
        older = re.search(r'rel="next" href="([^"]+)"', text)
        url = older.group(1).replace("&amp;", "&") if older else None
        newer = re.search(r'rel="prev" href="([^"]+)"', text)
        assert (newer is None) == (len(seen) == 1), "only the front page has no newer page"
    return seen


@pytest.mark.django_db
@override_settings(INSTATIC_POSTS_PER_PAGE=3)
def test_following_the_links_visits_every_page_as_the_paging_function_cuts_them(client, base):
    publish(base, [1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 14, 20, 21, 24, 25, 26])
    pages = walk(client)
    assert pages == expected_pages(3)
    assert [slug for page in pages for slug in page] == [
        f"p{n}" for n in (26, 25, 24, 21, 20, 14, 12, 11, 10, 9, 8, 7, 5, 4, 3, 2, 1)
    ]
    # Each page after the front one is /?from=<its first post's slug>, and links back.
    response = client.get(INDEX, {"from": pages[1][0]})
    assert response.status_code == 200 and 'rel="prev" href="/"' in response.content.decode()


@pytest.mark.django_db
@override_settings(INSTATIC_POSTS_PER_PAGE=3)
def test_a_page_keeps_its_address_when_posts_come_and_go_elsewhere(client, base):
    posts = publish(base, range(1, 16))
    page_at_6 = client.get(INDEX, {"from": "p6"}).content
    Post.objects.filter(pk=posts[13].pk).update(status=Post.Status.UNPUBLISHED)  # p14
    Post.objects.filter(pk=posts[1].pk).delete()  # p2
    publish(base, [16, 17], start=database_now() - timedelta(minutes=5))
    assert client.get(INDEX, {"from": "p6"}).content == page_at_6


@pytest.mark.django_db
@override_settings(INSTATIC_POSTS_PER_PAGE=3)
def test_old_page_numbers_and_links_to_posts_inside_a_page_redirect_to_their_page(client, base):
    publish(base, range(1, 15))  # pages: front 14..10, then 9 8 7, 6 5 4 and 3 2 1
    assert client.get(INDEX, {"page": "1"}).status_code == 200
    # ?page=N was the page of the posts from (N-1) x 3 down: its first post's page now.
    # Positions 3 (p11), 6 (p8), 9 (p5), 12 (p2).
    for number, target in [("2", "/"), ("3", "/?from=p9"), ("4", "/?from=p6"), ("5", "/?from=p3")]:
        response = client.get(INDEX, {"page": number})
        assert (response.status_code, response["Location"]) == (302, target), number
    assert client.get(INDEX, {"page": "6"}).status_code == 404
    # A post inside a page (it starts none, or is within the front page) redirects there.
    for slug, target in [("p5", "/?from=p6"), ("p12", "/"), ("p1", "/?from=p3"), ("p9", None)]:
        if target is None:
            assert client.get(INDEX, {"from": slug}).status_code == 200
            continue
        response = client.get(INDEX, {"from": slug})
        assert (response.status_code, response["Location"]) == (302, target), slug
    for slug in ("nope", "p 1", "\x00", ""):
        assert client.get(INDEX, {"from": slug}).status_code == 404, slug


@pytest.mark.django_db
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    live=st.sets(st.integers(min_value=1, max_value=60), max_size=40),
    per_page=st.integers(min_value=1, max_value=6),
)
def test_the_view_pages_as_the_paging_function_does(client, base, live, per_page):
    Post.objects.all().delete()
    publish(base, sorted(live, key=lambda n: (n * 7919) % 61))  # published out of id order
    with override_settings(INSTATIC_POSTS_PER_PAGE=per_page):
        assert walk(client) == expected_pages(per_page)
