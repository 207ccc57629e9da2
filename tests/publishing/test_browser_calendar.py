"""In Chromium: an editor changes their time zone and sees times and the calendar move; late
and failed items stand out on the calendar, which works with the keyboard alone.

Screenshots go to ``test-artifacts/`` so a person can check that the pages read well.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from coordination.clock import database_now
from publishing.models import Post
from tests.publishing.conftest import due_post, make_post
from tests.support.browser import screenshot, signed_in

S = Post.Status
CALENDAR = reverse("admin:publishing_post_calendar")


def test_an_editor_who_picks_tokyo_sees_jst_and_the_calendar_moves(
    live_server, editor, browser, request, settings
):
    settings.TIME_ZONE = "UTC"
    post = make_post(
        title="Sunday night launch",
        status=S.SCHEDULED,
        publish_at=datetime(2099, 1, 18, 16, 0, tzinfo=UTC),  # Monday 01:00 in Tokyo
    )
    week = f"{live_server.url}{CALENDAR}?start=2099-01-12&weeks=2"
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(week)
        assert "Sunday night launch" in page.inner_text("#day-2099-01-18")
        assert "16:00" in page.inner_text("#day-2099-01-18")

        page.click("text=Time zone: UTC")
        page.select_option("#id_time_zone", "Asia/Tokyo")
        page.click("input[type=submit]")
        page.wait_for_selector(".messagelist .success")
        assert "Time zone: Asia/Tokyo" in page.text_content("#user-tools")

        page.goto(f"{live_server.url}{reverse('admin:publishing_post_changelist')}")
        assert "Scheduled for (Asia/Tokyo)" in page.text_content("#result_list thead")
        assert "2099-01-19 01:00 JST" in page.inner_text("#result_list")

        page.goto(week)
        assert "Times in Asia/Tokyo" in page.inner_text("#calendar .summary")
        assert "Sunday night launch" not in page.inner_text("#day-2099-01-18")
        assert "01:00" in page.inner_text("#day-2099-01-19")
        screenshot(page, "calendar-in-tokyo")

        # The keyboard alone reaches the post from the calendar.
        target = reverse("admin:publishing_post_change", args=[post.pk])
        for _ in range(80):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.getAttribute('href')") == target:
                break
        else:
            pytest.fail("Tab never reached the post's link on the calendar")
        page.keyboard.press("Enter")
        page.wait_for_selector("#post_form")
        assert page.input_value("#id_publish_at_1") == "01:00:00"
        assert "HH:MM, 24-hour clock, Asia/Tokyo" in page.inner_text("#post_form")
    except BaseException:
        screenshot(page, request.node.name)
        raise


def test_the_calendar_makes_late_and_failed_posts_stand_out(live_server, editor, browser, request):
    now = database_now()
    late = due_post(seconds_ago=900, title="Late: the morning briefing")
    make_post(
        title="Failed: gallery",
        status=S.SCHEDULED,
        publish_at=now + timedelta(hours=1),
        last_error="the body is longer than 200,000 characters",
    )
    for n in range(3):
        make_post(
            title=f"On time {n}", status=S.SCHEDULED, publish_at=now + timedelta(days=n, hours=2)
        )
    make_post(
        title="Summer sale",
        status=S.PUBLISHED,
        unpublish_at=now + timedelta(days=5),
    )
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(f"{live_server.url}{CALENDAR}")
        late_item = page.locator("#calendar li.late, #overdue li.late").filter(has_text=late.title)
        assert late_item.count() == 1
        assert "LATE" in late_item.inner_text().upper()
        # Highlighted on its day, or with the overdue box it sits in when it fell due before
        # the calendar's first week (a test run in the first minutes of a week).
        background = late_item.evaluate(
            "el => getComputedStyle(el.closest('#overdue') || el).backgroundColor"
        )
        assert background == "rgb(255, 248, 197)", "late items are highlighted"
        failed_item = page.locator("#calendar li.failed").filter(has_text="Failed: gallery")
        assert "the body is longer" in failed_item.inner_text()
        assert page.locator("#calendar li.unpublish").filter(has_text="Summer sale").count() == 1
        assert "1 late, 1 failed" in page.inner_text("#calendar .summary")
        screenshot(page, "calendar-late-and-failed")
    except BaseException:
        screenshot(page, request.node.name)
        raise
