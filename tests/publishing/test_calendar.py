"""The calendar of what goes out: publishes, unpublishes, revisions and releases by day, in the
editor's zone.

An admin page (``admin:publishing_post_calendar``) for anyone who may view posts; late and
failed items stand out; a busy day shows a few items and a "+N more" link to the post list
filtered to that day; the items come from four queries however many there are (and two
more for the posts of the releases shown).
"""

import re
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings
from django.urls import reverse

from coordination.clock import database_now
from editors.models import EditorProfile
from publishing import calendar
from publishing.models import Post
from tests.publishing.conftest import _staff, due_post, make_post

pytestmark = pytest.mark.django_db

S = Post.Status
CALENDAR_URL = reverse("admin:publishing_post_calendar")
LIST_URL = reverse("admin:publishing_post_changelist")
TOKYO = ZoneInfo("Asia/Tokyo")
WEEK = "?start=2099-01-12"  # a Monday


def change_url(post: Post) -> str:
    return reverse("admin:publishing_post_change", args=[post.pk])


def day(html: str, when: str) -> str:
    """Return the HTML of the calendar cell of the day ``when`` (YYYY-MM-DD)."""
    match = re.search(rf'<section[^>]*id="day-{when}"[^>]*>(.*?)</section>', html, re.S)
    assert match, f"no cell for {when}"
    return match.group(1)


def item(html: str, post: Post) -> str:
    """Return the calendar item (``<li>``) that links to ``post``."""
    match = re.search(
        rf'<li class="([^"]*)"[^>]*>((?:(?!</li>).)*{change_url(post)}.*?)</li>', html, re.S
    )
    assert match, f"no item for {post}"
    return f'class="{match.group(1)}" {match.group(2)}'


@pytest.fixture
def tokyo(client, editor):
    EditorProfile.objects.create(user=editor, time_zone="Asia/Tokyo")
    client.force_login(editor)
    return client


def test_publishes_and_unpublishes_are_on_their_day_in_the_editors_zone(tokyo):
    # 20:00 UTC on the 14th is 05:00 JST on the 15th.
    late_evening = make_post(
        title="Morning news",
        status=S.SCHEDULED,
        publish_at=datetime(2099, 1, 14, 20, 0, tzinfo=UTC),
        unpublish_at=datetime(2099, 1, 16, 10, 0, tzinfo=UTC),
    )
    live = make_post(
        title="Winter sale",
        status=S.PUBLISHED,
        unpublish_at=datetime(2099, 1, 18, 14, 59, tzinfo=UTC),
    )
    make_post(title="Just a draft", publish_at=datetime(2099, 1, 15, 1, 0, tzinfo=UTC))

    response = tokyo.get(CALENDAR_URL + WEEK)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Times in Asia/Tokyo" in html
    assert "Morning news" in day(html, "2099-01-15")
    assert "05:00" in item(day(html, "2099-01-15"), late_evening)
    assert "publish" in item(day(html, "2099-01-15"), late_evening)
    unpublish = item(day(html, "2099-01-16"), late_evening)
    assert "19:00" in unpublish and "unpublish" in unpublish
    assert "23:59" in item(day(html, "2099-01-18"), live)
    assert "Just a draft" not in html, "drafts are not going out"
    assert "Morning news" not in day(html, "2099-01-14")


def test_the_window_moves_with_the_editors_zone(client, editor):
    # 16:00 UTC on Sunday the 18th is Monday the 19th in Tokyo: the next week there.
    post = make_post(
        title="Edge", status=S.SCHEDULED, publish_at=datetime(2099, 1, 18, 16, 0, tzinfo=UTC)
    )
    client.force_login(editor)
    with override_settings(TIME_ZONE="UTC"):
        assert "Edge" in day(client.get(CALENDAR_URL + WEEK).content.decode(), "2099-01-18")
    EditorProfile.objects.create(user=editor, time_zone="Asia/Tokyo")
    html = client.get(CALENDAR_URL + WEEK).content.decode()
    assert change_url(post) in day(html, "2099-01-19")


def test_late_and_failed_posts_stand_out(tokyo):
    late = due_post(seconds_ago=600, title="Overdue notice")
    failed = make_post(
        title="Broken",
        status=S.SCHEDULED,
        publish_at=database_now() + timedelta(hours=2),
        last_error="the body is empty",
    )
    on_time = make_post(
        title="Fine", status=S.SCHEDULED, publish_at=database_now() + timedelta(hours=3)
    )
    html = tokyo.get(CALENDAR_URL).content.decode()
    late_item = item(html, late)
    assert "late" in late_item.split('"')[1].split()
    assert "late" in re.sub(r"<[^>]+>", " ", late_item).split()
    failed_item = item(html, failed)
    assert "failed" in failed_item.split('"')[1].split()
    assert "the body is empty" in failed_item
    assert "late" not in item(html, on_time).split('"')[1].split()
    assert "1 late, 1 failed" in html


def test_overdue_items_from_before_the_window_are_listed_first(tokyo):
    old = due_post(seconds_ago=40 * 86400, title="Forgotten")
    html = tokyo.get(CALENDAR_URL).content.decode()
    overdue = re.search(r'<section[^>]*id="overdue"[^>]*>(.*?)</section>', html, re.S)
    assert overdue, "an overdue section"
    assert change_url(old) in overdue.group(1)


@override_settings(INSTATIC_PUBLISH_CALENDAR_DAY_LIMIT=5)
def test_a_busy_day_shows_a_few_items_and_links_to_the_rest(tokyo):
    noon = datetime(2099, 1, 15, 3, 0, tzinfo=UTC)  # 12:00 JST
    for minute in range(12):
        make_post(status=S.SCHEDULED, publish_at=noon + timedelta(minutes=minute))
    make_post(status=S.SCHEDULED, publish_at=noon + timedelta(days=1))  # not that day
    cell = day(tokyo.get(CALENDAR_URL + WEEK).content.decode(), "2099-01-15")
    assert cell.count("<li") == 5
    more = re.search(r'<a [^>]*href="([^"]+)"[^>]*>\+7 more publishes', cell)
    assert more, cell
    listing = tokyo.get(more.group(1).replace("&amp;", "&"))
    assert listing.status_code == 200
    assert "12 posts" in listing.content.decode()


def test_items_come_from_four_queries_however_many_there_are(django_assert_num_queries, db):
    start = datetime(2099, 1, 12, tzinfo=UTC)
    for n in range(40):
        make_post(
            status=S.SCHEDULED,
            publish_at=start + timedelta(hours=7 * n),
            unpublish_at=start + timedelta(hours=7 * n + 30),
        )
    now = database_now()
    with django_assert_num_queries(4):  # publishes, unpublishes, revisions, releases
        built = calendar.build(start=date(2099, 1, 12), weeks=4, zone=TOKYO, now=now, day_limit=3)
    assert sum(d.total for week in built.weeks for d in week) == 80
    assert all(len(d.entries) <= 3 for week in built.weeks for d in week)


def test_scheduled_revisions_have_a_hook(tokyo, monkeypatch):
    post = make_post(title="Revised", status=S.PUBLISHED)
    at = datetime(2099, 1, 13, 1, 0, tzinfo=UTC)

    def switches(start, end, now):
        return [calendar.Entry(calendar.Kind.REVISION, post.pk, post.title, at, "")]

    monkeypatch.setattr(calendar, "revision_switches", switches)
    cell = day(tokyo.get(CALENDAR_URL + WEEK).content.decode(), "2099-01-13")
    assert "revision" in item(cell, post)


def test_only_users_who_may_view_posts_see_it(client, drafter, db):
    outsider = _staff("outsider", [])
    client.force_login(outsider)
    assert client.get(CALENDAR_URL).status_code == 403
    client.force_login(drafter)
    assert client.get(CALENDAR_URL).status_code == 200
    client.logout()
    assert client.get(CALENDAR_URL).status_code == 302


def test_the_post_list_and_the_admin_index_link_to_it(tokyo):
    assert CALENDAR_URL in tokyo.get(LIST_URL).content.decode()
    assert CALENDAR_URL in tokyo.get(reverse("admin:index")).content.decode()


def test_weeks_can_be_paged_with_links(tokyo):
    html = tokyo.get(CALENDAR_URL + WEEK).content.decode()
    # Earlier and Later move by the weeks shown (four by default).
    assert "?start=2098-12-15&amp;weeks=4" in html
    assert "?start=2099-02-09&amp;weeks=4" in html
    # A day that is not a Monday starts the calendar at its week's Monday.
    html = tokyo.get(CALENDAR_URL + "?start=2099-01-15").content.decode()
    assert 'id="day-2099-01-12"' in html
    assert tokyo.get(CALENDAR_URL + "?start=garbage").status_code == 200


def test_a_release_is_one_entry_with_its_posts_on_its_day_and_a_stopped_one_says_why(
    tokyo, editor, django_assert_max_num_queries
):
    from releases import actions as releases
    from releases.models import Release

    launch = releases.create_release(name="Spring launch", user=editor)
    for n in range(7):
        releases.add_item(release=launch, post=make_post(title=f"Launch post {n}"), user=editor)
    releases.schedule_release(
        release=launch, release_at=database_now() + timedelta(days=1), user=editor
    )
    at = datetime(2099, 1, 13, 1, 0, tzinfo=UTC)  # 10:00 JST on the 13th
    Release.objects.filter(pk=launch.pk).update(release_at=at, problem="“Launch post 3”: gone")

    html = tokyo.get(CALENDAR_URL + WEEK).content.decode()
    cell = day(html, "2099-01-13")
    url = reverse("admin:releases_release_change", args=[launch.pk])
    assert cell.count(url) == 1
    assert "10:00 JST" in cell and "Spring launch" in cell
    assert all(f"Launch post {n}" in cell for n in range(5))
    assert "Launch post 5" not in cell and "and 2 more posts" in cell
    assert "stopped" in cell and "“Launch post 3”: gone" in cell
    # A stopped release waits for an editor: nothing of it failed.
    assert 'class="entry release stopped"' in cell
    assert "1 release stopped, waiting for an editor" in html and "failed" not in cell
    assert "0 failed" not in html
    now = database_now()
    with django_assert_max_num_queries(6):  # 4 kinds of entry, the release's count and posts
        calendar.build(start=date(2099, 1, 12), weeks=4, zone=TOKYO, now=now, day_limit=3)
