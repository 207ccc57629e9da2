"""The site at a moment: what editors see of it, who may, and that it is what the publish job
will make of the site.

The property: for random schedules (publishes, takedowns, revisions, on posts of every
state) whose times have come, the site computed for now before the publish job runs is the
site after the job has run: the same posts live, each with the same title.
"""

import html
import re
from datetime import datetime, time, timedelta
from unittest.mock import patch
from urllib.parse import urlsplit
from xml.etree import ElementTree
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from coordination.clock import database_now
from publishing import revisions, selectors, site_at_pages
from publishing.models import Post, PostRevision
from publishing.site_at import apply, newest_live
from publishing.site_at_facts import changes_by, pages_of
from publishing.sitemaps import PostSitemap
from tests.publishing.conftest import future_post, live_post, make_post, run_publish_job

pytestmark = pytest.mark.django_db

SITE_AT = reverse("admin:publishing_post_site_at")


def post_url(slug: str) -> str:
    return reverse("admin:publishing_post_site_at_post", kwargs={"slug": slug})


def at_query(moment) -> dict:
    return {"at": moment.isoformat()}


def test_the_index_at_a_moment_has_what_will_be_live_then(as_editor, editor):
    now = database_now()
    staying = live_post(title="Staying")
    going = live_post(title="Going", unpublish_at=now + timedelta(hours=1))
    coming = future_post(seconds_ahead=1800, title="Coming")
    later = future_post(seconds_ahead=7200, title="Later")
    revised = live_post(title="Old title")
    revisions.schedule_revision(
        post=revised,
        title="New title",
        body="New.",
        publish_at=now + timedelta(minutes=30),
        user=editor,
    )
    response = as_editor.get(SITE_AT, at_query(now + timedelta(hours=1, minutes=1)))
    page = response.content.decode()
    assert response.status_code == 200
    listed = page[page.index("<main>") :]
    for shown in ("Staying</a>", "Coming</a>", "New title</a>"):
        assert shown in listed
    for hidden in ("Going</a>", "Later</a>", "Old title</a>"):
        assert hidden not in listed
    assert 'id="site-at-banner"' in page and "The site as it will be at" in page
    banner = page[page.index('id="site-at-differences"') :]
    assert "Coming</a> goes live" in banner and "Going</a> is taken down" in banner
    assert "New title</a> gets a new text" in banner
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert "no-store" in response["Cache-Control"]
    assert staying.pk and later.pk and coming.pk and going.pk


def test_a_post_at_a_moment_shows_its_text_then_or_says_it_is_not_live(as_editor, editor):
    now = database_now()
    post = live_post(title="Prices", body="Old prices.")
    revisions.schedule_revision(
        post=post,
        title="Prices",
        body="**New** prices.",
        publish_at=now + timedelta(hours=1),
        user=editor,
    )
    before = as_editor.get(post_url(post.slug), at_query(now + timedelta(minutes=30)))
    after = as_editor.get(post_url(post.slug), at_query(now + timedelta(hours=2)))
    assert "Old prices." in before.content.decode()
    assert "<strong>New</strong> prices." in after.content.decode()
    draft = make_post(title="Draft")
    page = as_editor.get(post_url(draft.slug), at_query(now + timedelta(hours=2))).content
    assert b'id="site-at-not-live"' in page


def test_a_change_that_will_not_happen_is_listed_with_why(as_editor):
    failed = future_post(seconds_ahead=60, title="")
    page = as_editor.get(SITE_AT, at_query(database_now() + timedelta(minutes=5))).content
    text = page.decode()
    assert "will not happen" in text and "title" in text.lower()
    assert failed.pk


@pytest.mark.parametrize(
    "query",
    [
        {"at": "tomorrow"},
        {"at": "0001-01-01T00:00:00+14:00"},
        {"at": "9999-12-31T23:59:59-14:00"},
        {"at": "2020-01-01T00:00:00+00:00"},
        {"at": "2030-01-01T00:00:00"},
        {"day": "2030-02-30", "time": "10:00"},
        {"day": "x" * 5000, "time": "10:00"},
        {"day": "2030-03-31", "time": "02:30"},  # Europe/Berlin: no such time
    ],
)
def test_a_hostile_moment_is_a_clear_message(as_editor, settings, query):
    settings.TIME_ZONE = "Europe/Berlin"
    response = as_editor.get(SITE_AT, query)
    assert response.status_code == 200
    assert b'id="site-at-problem"' in response.content


def test_a_far_moment_is_shown(as_editor):
    response = as_editor.get(SITE_AT, {"at": "9999-12-30T00:00:00+00:00"})
    assert response.status_code == 200 and b'id="site-at-banner"' in response.content


def test_a_moment_typed_in_the_editors_zone(as_editor):
    tomorrow = (database_now() + timedelta(days=1)).date().isoformat()
    response = as_editor.get(SITE_AT, {"day": tomorrow, "time": "09:30"})
    assert b'id="site-at-banner"' in response.content
    assert b'id="site-at-form"' in as_editor.get(SITE_AT).content


def test_only_editors_who_may_preview_see_it(client):
    moment = at_query(database_now() + timedelta(hours=1))
    assert client.get(SITE_AT, moment).status_code == 302  # to the login page
    User.objects.create_user("visitor", password="pw", is_staff=True)
    client.login(username="visitor", password="pw")
    assert client.get(SITE_AT, moment).status_code == 403


def test_the_post_list_and_the_calendar_offer_it_to_editors_who_may_see_it(as_editor, client):
    for page in ("admin:publishing_post_changelist", "admin:publishing_post_calendar"):
        page = as_editor.get(reverse(page)).content.decode()
        assert f'href="{SITE_AT}" id="site-at-link"' in page
    reader = User.objects.create_user("reader", password="pw", is_staff=True)
    reader.user_permissions.add(*Permission.objects.filter(codename="view_post"))
    client.login(username="reader", password="pw")
    for page in ("admin:publishing_post_changelist", "admin:publishing_post_calendar"):
        response = client.get(reverse(page))
        assert response.status_code == 200 and 'id="site-at-link"' not in response.content.decode()


def test_it_is_not_on_the_public_site(client):
    assert client.get("/site-at/").status_code == 404


#: A post's schedule: what it is now, and which of its changes have come (seconds ago).
schedules = st.lists(
    st.fixed_dictionaries(
        {
            "state": st.sampled_from(["draft", "scheduled", "published"]),
            "publish": st.integers(1, 8),
            "unpublish": st.none() | st.integers(1, 8),
            "revision": st.none() | st.integers(1, 8),
            "empty_title": st.booleans(),
        }
    ),
    min_size=1,
    max_size=5,
)


def _make(schedule: dict, now, n: int) -> None:
    ago = lambda seconds: now - timedelta(seconds=seconds)  # noqa: E731
    title = "" if schedule["empty_title"] and schedule["state"] == "scheduled" else f"Post {n}"
    values = {"title": title, "slug": f"site-at-{n}"}
    if schedule["state"] == "scheduled":
        values.update(status=Post.Status.SCHEDULED, publish_at=ago(schedule["publish"]))
    elif schedule["state"] == "published":
        values.update(status=Post.Status.PUBLISHED, published_at=ago(60))
    unpublish = schedule["unpublish"]
    if schedule["state"] == "scheduled" and unpublish is not None:
        # The database keeps a takedown after its publish.
        unpublish = unpublish if unpublish < schedule["publish"] else None
    if schedule["state"] != "draft" and unpublish is not None:
        values["unpublish_at"] = ago(unpublish)
    post = make_post(**values)
    if schedule["state"] == "published" and schedule["revision"] is not None:
        PostRevision.objects.create(
            post=post,
            number=1,
            title=f"Revised {n}",
            body="Revised.",
            body_html="<p>Revised.</p>",
            status=PostRevision.Status.SCHEDULED,
            publish_at=ago(schedule["revision"]),
        )


def _public_site() -> dict[int, str]:
    return dict(selectors.live_posts().values_list("pk", "title"))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(schedules)
def test_the_site_at_a_moment_is_what_the_publish_job_makes_of_it(db, schedule_list):
    Post.objects.all().delete()
    now = database_now()
    for n, schedule in enumerate(schedule_list):
        _make(schedule, now, n)
    changes = changes_by(now)
    shown, _ = apply(pages_of(Post.objects.values_list("pk", flat=True)), changes, now)
    expected = {pk: page.title for pk, page in shown.items() if page.live}
    for _round in range(3):  # a full batch returns "now"; a few runs drain any
        run_publish_job()
    assert _public_site() == expected


def test_the_feed_at_a_moment_lists_what_will_be_live(as_editor):
    now = database_now()
    future_post(seconds_ahead=1800, title="Spring menu", body="Fresh *peas*.")
    live_post(title="Winter sale", unpublish_at=now + timedelta(minutes=10))
    at = now + timedelta(hours=1)
    assert b'id="site-at-feed"' in as_editor.get(SITE_AT, at_query(at)).content
    response = as_editor.get(reverse("admin:publishing_post_site_at_feed"), at_query(at))
    feed = response.content.decode()
    assert response.status_code == 200 and "<feed" in feed
    assert "Spring menu" in feed and "&lt;em&gt;peas&lt;/em&gt;" in feed
    assert "Winter sale" not in feed
    assert "/admin/publishing/post/site-at/posts/" in feed  # links stay on the moment
    assert response["X-Robots-Tag"] == "noindex, nofollow"


NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


def locations(response) -> list[str]:
    assert response.status_code == 200, response.status_code
    return [loc.text for loc in ElementTree.fromstring(response.content).iter(f"{NS}loc")]


def test_the_sitemap_at_a_moment_lists_what_will_be_live(as_editor, monkeypatch):
    monkeypatch.setattr(PostSitemap, "limit", 2)  # two posts a page: the posts span pages
    now = database_now()
    staying = [live_post(title=f"Staying {n}") for n in range(3)]
    going = live_post(title="Going", unpublish_at=now + timedelta(minutes=10))
    coming = future_post(seconds_ahead=1800, title="Coming")
    later = future_post(seconds_ahead=7200, title="Later")
    at = at_query(now + timedelta(hours=1))
    banner = as_editor.get(SITE_AT, at).content.decode()
    assert 'id="site-at-sitemap"' in banner
    response = as_editor.get(reverse("admin:publishing_post_site_at_sitemap"), at)
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert "no-store" in response["Cache-Control"]
    listed = []
    for page in locations(response):
        section = as_editor.get(page.removeprefix("http://testserver"))
        assert section["X-Robots-Tag"] == "noindex, nofollow"
        listed += [urlsplit(loc).path for loc in locations(section)]
    moment_posts = reverse("admin:publishing_post_site_at_post", kwargs={"slug": "x"})[:-2]
    expected = {f"{moment_posts}{post.slug}/" for post in [*staying, coming]}
    assert set(listed) == expected | {SITE_AT}
    assert len(listed) == len(expected) + 1
    for hidden in (going, later):
        assert f"{moment_posts}{hidden.slug}/" not in listed
    unknown = reverse("admin:publishing_post_site_at_sitemap_section", kwargs={"section": "x"})
    assert as_editor.get(unknown, at).status_code == 404


def test_the_banner_names_the_first_changes_and_counts_the_rest(as_editor, monkeypatch):
    monkeypatch.setattr(site_at_pages, "BANNER_MOST", 2)
    first = future_post(seconds_ahead=600, title="First")
    second = live_post(title="Second", unpublish_at=database_now() + timedelta(seconds=900))
    for n in range(3):
        future_post(seconds_ahead=1200 + n, title=f"Later {n}")
    page = as_editor.get(SITE_AT, at_query(database_now() + timedelta(hours=1))).content.decode()
    banner = page[page.index('id="site-at-differences"') : page.index("</aside>")]
    assert "5 changes from now" in banner
    assert "First</a> goes live" in banner and "Second</a> is taken down" in banner
    assert "Later" not in banner and "and 3 more changes" in banner
    assert first.pk and second.pk


#: A post's schedule for the index: what it is now and its changes (minutes from now; a
#: negative time is overdue: due, the job not run yet).
index_schedules = st.lists(
    st.fixed_dictionaries(
        {
            "state": st.sampled_from(["draft", "scheduled", "published"]),
            "live_since": st.integers(1, 4),
            "publish": st.integers(-3, 8),
            "unpublish": st.none() | st.integers(-2, 9),
            "revision": st.none() | st.integers(1, 9),
        }
    ),
    min_size=1,
    max_size=8,
)


def _schedule(state: str = "scheduled", **changes) -> dict:
    return {
        "state": state,
        "live_since": 1,
        "publish": 1,
        "unpublish": None,
        "revision": None,
    } | changes


def _make_for_index(schedule: dict, now, n: int) -> None:
    minutes = lambda m: now + timedelta(minutes=m)  # noqa: E731
    values = {"title": f"Post {n}", "slug": f"index-at-{n}"}
    state = schedule["state"]
    if state == "scheduled":
        values.update(status=Post.Status.SCHEDULED, publish_at=minutes(schedule["publish"]))
    elif state == "published":
        values.update(status=Post.Status.PUBLISHED, published_at=minutes(-schedule["live_since"]))
    unpublish = schedule["unpublish"]
    if state == "scheduled" and unpublish is not None and unpublish <= schedule["publish"]:
        unpublish = None  # the database keeps a takedown after its publish
    if state != "draft" and unpublish is not None:
        values["unpublish_at"] = minutes(unpublish)
    post = make_post(**values)
    if state == "published" and schedule["revision"] is not None:
        PostRevision.objects.create(
            post=post,
            number=1,
            title=f"Revised {n}",
            body="Revised.",
            body_html="<p>Revised.</p>",
            status=PostRevision.Status.SCHEDULED,
            publish_at=minutes(schedule["revision"]),
        )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(index_schedules, st.integers(1, 3))
# The latest publish is taken down by then: the next one, outside the window, is newer than
# the newest post live now.
@example(
    [_schedule("published", live_since=1), _schedule(publish=1), _schedule(publish=2, unpublish=3)],
    1,
)
# The newest post live now is taken down: the next one, outside the window, is newer than an
# overdue publish.
@example(
    [
        _schedule("published", live_since=1, unpublish=1),
        _schedule("published", live_since=2),
        _schedule(publish=-3),
    ],
    1,
)
def test_the_index_read_in_windows_is_the_index_of_every_change(db, schedule_list, window):
    Post.objects.all().delete()
    now = database_now()
    for n, schedule in enumerate(schedule_list):
        _make_for_index(schedule, now, n)
    at = now + timedelta(minutes=10)
    every = changes_by(at)
    shown, _ = apply(pages_of(Post.objects.values_list("pk", flat=True)), every, at)
    expected = [(p.post_id, p.title) for p in newest_live(shown.values(), at, unseen_below=None)]
    with patch.object(site_at_pages, "WINDOW", window):
        for count in (1, 2, 3, len(schedule_list) + 1):
            newest, _plan = site_at_pages.newest_at(at, count)
            assert [(p.post_id, p.title) for p in newest] == expected[:count]


def test_each_day_of_the_calendar_shows_the_site_as_the_day_leaves_it(as_editor, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    zone = ZoneInfo("Europe/Berlin")
    tomorrow = (database_now().astimezone(zone) + timedelta(days=1)).date()
    noon = datetime.combine(tomorrow, time(12), tzinfo=zone)
    scheduled = Post.Status.SCHEDULED
    make_post(title="Tomorrow's", status=scheduled, publish_at=noon)
    make_post(title="The day after's", status=scheduled, publish_at=noon + timedelta(days=1))
    page = as_editor.get(reverse("admin:publishing_post_calendar")).content.decode()
    day = page[page.index(f'id="day-{tomorrow.isoformat()}"') :]
    day = day[: day.index("</h3>")]
    assert "See the site then" in day
    link = html.unescape(day[day.index('href="') + 6 :].split('"')[0])
    shown = as_editor.get(link).content.decode()
    assert "23:59" in shown[: shown.index("</aside>")]
    listed = shown[shown.index("<main>") :]
    assert "Tomorrow&#x27;s</a>" in listed and "The day after" not in listed
    for past in re.findall(r'<section class="day past".*?</h3>', page, re.S):
        assert "See the site then" not in past
