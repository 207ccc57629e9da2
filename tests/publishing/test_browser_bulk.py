"""In Chromium: an editor in Berlin selects posts in the post list and schedules them all for
one time, typed in their own zone.

Screenshots go to ``test-artifacts/`` so a person can check that the pages read well.
"""

from datetime import UTC, datetime

from editors.models import EditorProfile
from publishing.models import Post
from tests.publishing.conftest import make_post
from tests.support.browser import screenshot, signed_in


def test_an_editor_schedules_selected_posts_for_one_time_in_their_zone(
    live_server, editor, browser, request
):
    EditorProfile.objects.create(user=editor, time_zone="Europe/Berlin")
    for title in ("Morning news", "Weather", "Sports"):
        make_post(title=title)
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(f"{live_server.url}/admin/publishing/post/")
        for title in ("Morning news", "Weather"):
            page.locator("tr", has_text=title).locator("input.action-select").check()
        page.select_option("select[name=action]", "bulk_schedule_action")
        page.click("button[name=index]")
        page.wait_for_selector("#bulk-schedule")
        assert "Europe/Berlin" in page.inner_text("#bulk-schedule")
        page.fill("#id_publish_at_0", "2099-06-01")
        page.fill("#id_publish_at_1", "07:30:00")
        screenshot(page, "bulk-schedule")
        page.click("#bulk-schedule input[type=submit]")
        page.wait_for_selector(".messagelist .success")
        assert "2 posts scheduled." in page.inner_text(".messagelist .success")
        screenshot(page, "bulk-scheduled")
    except BaseException:
        screenshot(page, request.node.name)
        raise
    half_past_seven_in_berlin = datetime(2099, 6, 1, 5, 30, tzinfo=UTC)
    scheduled = Post.objects.filter(status=Post.Status.SCHEDULED)
    assert sorted(scheduled.values_list("title", flat=True)) == ["Morning news", "Weather"]
    assert set(scheduled.values_list("publish_at", flat=True)) == {half_past_seven_in_berlin}
    assert Post.objects.get(title="Sports").status == Post.Status.DRAFT
