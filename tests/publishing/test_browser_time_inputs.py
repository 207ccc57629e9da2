"""In Chromium, with the browser's own clock in UTC and the editor working in Asia/Tokyo:
every date and time input is labelled with its format and the editor's zone, has the admin's
calendar and clock, fills "Today" and "Now" in the editor's zone, and no note about "server
time" contradicts the zone the page names.

Screenshots go to ``test-artifacts/`` so a person can check that the inputs read well.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from coordination.clock import database_now
from editors.models import EditorProfile
from publishing.models import Post, PostRevision
from tests.publishing.conftest import make_post
from tests.publishing.test_browser_panel import sign_in
from tests.support.browser import screenshot

pytestmark = [pytest.mark.sqlite]

S = Post.Status
# The browser's clock, fixed: 00:30 UTC is 09:30 on the same day in Tokyo.
BROWSER_NOW = datetime(2099, 1, 5, 0, 30, tzinfo=UTC)


def check_time_inputs(page, prefix: str) -> None:
    for part, label, hint in (
        ("0", "Date:", "YYYY-MM-DD"),
        ("1", "Time:", "HH:MM, 24-hour clock, Asia/Tokyo"),
    ):
        field = f"#{prefix}_{part}"
        assert page.inner_text(f"label[for={prefix}_{part}]") == label
        assert page.inner_text(f"{field}_format") == hint
        assert page.get_attribute(field, "aria-describedby") == f"{prefix}_{part}_format"
    row = page.locator(f"#{prefix}_0").locator("xpath=ancestor::div[contains(@class,'form-row')]")
    assert row.locator(".datetimeshortcuts").count() == 2, "the admin's calendar and clock"
    assert page.locator(".timezonewarning").count() == 0
    assert "server time" not in page.inner_text("#content")


@pytest.mark.parametrize("where", ["post", "revision"])
def test_times_are_typed_in_the_editors_zone_with_labels_and_no_server_time_note(
    live_server, editor, browser, request, where
):
    EditorProfile.objects.create(user=editor, time_zone="Asia/Tokyo")
    post = make_post(title="Opening hours", status=S.PUBLISHED if where == "revision" else S.DRAFT)
    page = sign_in(browser, live_server, "editor")
    page.clock.set_fixed_time(BROWSER_NOW)
    if where == "post":
        url = reverse("admin:publishing_post_change", args=[post.pk])
    else:
        url = reverse("admin:publishing_post_revisions", args=[post.pk])
    try:
        page.goto(f"{live_server.url}{url}")
        page.wait_for_selector("#id_publish_at_0 ~ .datetimeshortcuts")
        check_time_inputs(page, "id_publish_at")
        if where == "post":
            check_time_inputs(page, "id_unpublish_at")

        # "Today" and "Now" fill in the editor's date and time, which the form reads them in.
        page.click("#id_publish_at_0 ~ .datetimeshortcuts >> text=Today")
        page.click("#id_publish_at_1 ~ .datetimeshortcuts >> text=Now")
        assert page.input_value("#id_publish_at_0") == "2099-01-05"
        assert page.input_value("#id_publish_at_1") == "09:30", "no seconds the hint lacks"
        screenshot(page, f"time-inputs-{where}")
    except BaseException:
        screenshot(page, request.node.name)
        raise


def test_a_revision_typed_in_tokyo_goes_live_at_that_tokyo_time(
    live_server, editor, browser, request
):
    EditorProfile.objects.create(user=editor, time_zone="Asia/Tokyo")
    post = make_post(title="Opening hours", status=S.PUBLISHED)
    page = sign_in(browser, live_server, "editor")
    url = reverse("admin:publishing_post_revisions", args=[post.pk])
    try:
        page.goto(f"{live_server.url}{url}")
        page.fill("#id_title", "Opening hours (winter)")
        page.fill("#id_publish_at_0", "2099-01-05")
        page.fill("#id_publish_at_1", "09:30")
        page.click("input[name=_schedule]")
        message = page.inner_text(".messagelist .success")
        assert "goes live" in message and "JST" in message
        revision = PostRevision.objects.get(post=post, status=PostRevision.Status.SCHEDULED)
        assert revision.publish_at == BROWSER_NOW
        assert revision.publish_at > database_now() + timedelta(days=1)
    except BaseException:
        screenshot(page, request.node.name)
        raise
