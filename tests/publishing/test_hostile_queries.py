"""Query strings a visitor or an editor can type: never a server error.

Every public URL (index, post, feed, sitemap, preview link) and the admin calendar answer any
query string with a page, a redirect or the ordinary 404: a page number that is not a number
written in ASCII digits, or is past the last page, is a 404; a calendar start outside the
years the calendar shows is clamped to its first or last week.
"""

from datetime import timedelta

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordination.clock import database_now
from editors.models import EditorProfile
from publishing import previews
from publishing.models import Post
from tests.publishing.conftest import make_post

pytestmark = pytest.mark.django_db

INDEX = reverse("publishing:index")
CALENDAR = reverse("admin:publishing_post_calendar")
#: The zones furthest ahead of and behind UTC, and UTC itself.
ZONES = ["Pacific/Kiritimati", "Etc/GMT+12", "UTC"]


@pytest.mark.parametrize(
    "page",
    ["\u00b2", "\u0663", "\uff11", "99999999999999999999999", "9" * 5000, "-1", "0", "", " 1"],
)
def test_a_page_that_is_not_a_plain_number_or_past_the_end_is_a_404(client, page):
    make_post(status=Post.Status.PUBLISHED)
    response = client.get(INDEX, {"page": page})
    # An empty value is the first page; everything else here is no page at all.
    assert response.status_code == (200 if page == "" else 404)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize(
    ("start", "shown"),
    [("0001-01-01", "0001-0"), ("9999-12-27", "9999-"), ("9999-12-31", "9999-")],
)
def test_a_calendar_start_at_the_ends_of_time_is_clamped(client, editor, zone, start, shown):
    EditorProfile.objects.create(user=editor, time_zone=zone)
    client.force_login(editor)
    for weeks in ("1", "12", "99999999999999999999"):
        response = client.get(CALENDAR, {"start": start, "weeks": weeks})
        assert response.status_code == 200
        assert f'id="day-{shown}' in response.content.decode()


def _preview_url(post: Post) -> str:
    token = previews.make_token(
        post_id=post.pk, generation=0, expires_at=database_now() + timedelta(hours=1)
    )
    return reverse("publishing:preview", args=[token])


#: Values a visitor can put in a query string: unicode digits, huge and negative numbers,
#: dates at the ends of time, empty, anything.
VALUES = st.one_of(
    st.sampled_from(
        [
            "",
            "1",
            "2",
            "\u00b2",
            "\u0663",
            "\uff12",
            "99999999999999999999999",
            "-1",
            "0",
            "1e9",
            "0001-01-01",
            "9999-12-27",
            "9999-12-31",
            "2026-02-30",
            "\x00",
            "a-slug",
        ]
    ),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.text(max_size=12),
)
KEYS = st.sampled_from(["page", "p", "from", "start", "weeks", "slug", "q", ""]) | st.text(
    max_size=6
)
QUERIES = st.lists(st.tuples(KEYS, VALUES), max_size=4)
#: The client and the posts are the same for every example: what varies is the query.
PROPERTY = settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _get(client, url: str, query: list[tuple[str, str]]):
    # The test client builds the query string from a dict or a list of pairs (repeated keys).
    return client.get(url, query)


@PROPERTY
@given(query=QUERIES)
def test_no_query_string_makes_a_public_page_fail(client, query):
    post = Post.objects.filter(slug="the-live-post").first() or make_post(
        status=Post.Status.PUBLISHED, slug="the-live-post"
    )
    urls = [
        INDEX,
        post.get_absolute_url(),
        reverse("publishing:feed"),
        reverse("publishing:sitemap"),
        reverse("publishing:sitemap_section", kwargs={"section": "posts"}),
        reverse("publishing:sitemap_section", kwargs={"section": "pages"}),
        _preview_url(post),
    ]
    for url in urls:
        status = _get(client, url, query).status_code
        assert status in (200, 301, 302, 404), (url, query, status)


@pytest.fixture
def far_ahead_editor(client, editor):
    EditorProfile.objects.create(user=editor, time_zone="Pacific/Kiritimati")
    client.force_login(editor)
    return client


#: The calendar's own keys more often, with the ends of Python's dates (years 1 and 9999)
#: and any date between.
ENDS_OF_TIME = st.sampled_from(["0001-01-01", "0001-02-28", "9999-12-27", "9999-12-31"])
CALENDAR_QUERIES = st.lists(
    st.tuples(
        st.sampled_from(["start", "weeks"]) | KEYS,
        ENDS_OF_TIME | st.dates().map(str) | VALUES,
    ),
    max_size=4,
)


@PROPERTY
@given(query=CALENDAR_QUERIES)
def test_no_query_string_makes_the_calendar_fail(far_ahead_editor, query):
    status = _get(far_ahead_editor, CALENDAR, query).status_code
    assert status == 200, (query, status)
