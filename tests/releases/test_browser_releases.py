"""In Chromium: an editor puts a launch together from the post list, schedules it, sees it stop
when a post changes after review, refreshes that post, and the public site shows every post of
the launch at once when the publish job sends it out.

Screenshots go to ``test-artifacts/`` so a person can check that the pages read well.
"""

from datetime import timedelta

from django.utils import timezone

from coordination.clock import database_now
from publishing import revisions
from publishing.models import Post
from releases.models import Release
from tests.publishing.conftest import live_post, make_post, run_publish_job
from tests.support.browser import screenshot, signed_in
from tests.support.polling import wait_until


def test_an_editor_puts_a_launch_together_schedules_it_and_it_goes_out_at_once(
    live_server, editor, browser, request
):
    make_post(title="New product", slug="new-product", body="The *new* product.")
    make_post(title="Launch offer", slug="launch-offer", body="Half price this week.")
    pricing = live_post(title="Pricing", slug="pricing", body="Old prices.")
    revisions.schedule_revision(
        post=pricing,
        title="Pricing",
        body="New prices.",
        publish_at=database_now() + timedelta(days=2),
        user=editor,
    )
    page = signed_in(browser, live_server, "editor", "pw")
    admin = f"{live_server.url}/admin/publishing"
    try:
        page.goto(f"{live_server.url}/admin/releases/release/add/")
        page.fill("#id_name", "Spring launch")
        page.click("input[name=_continue]")
        page.wait_for_selector("#release-items")
        release = Release.objects.get(name="Spring launch")

        page.goto(f"{admin}/post/")
        for title in ("New product", "Launch offer", "Pricing"):
            page.locator("tr", has_text=title).locator("input.action-select").check()
        page.select_option("select[name=action]", "add_to_release_action")
        page.click("button[name=index]")
        page.wait_for_selector("#add-to-release")
        screenshot(page, "release-add-posts")
        page.click("#add-to-release input[type=submit]")
        page.wait_for_selector(".messagelist .success")
        assert "3 posts added to “Spring launch”" in page.inner_text(".messagelist .success")
        assert page.locator(".release-item-ready").count() == 3
        assert "Put its new revision live" in page.inner_text("#release-items")

        when = timezone.localtime(database_now() + timedelta(seconds=10))
        page.fill("#id_release_at_0", when.strftime("%Y-%m-%d"))
        page.fill("#id_release_at_1", when.strftime("%H:%M:%S"))
        page.click("input[name=_continue]")
        page.wait_for_selector("#release-buttons")
        page.click("#release-buttons button[value=schedule]")
        page.wait_for_selector(".messagelist .success")
        assert "every item goes out together" in page.inner_text(".messagelist .success")
        screenshot(page, "release-scheduled")

        # The editor opens a post of the launch: the page says so at its top. Saving a
        # change stops the launch, and the save's message says which and what to do.
        offer = Post.objects.get(slug="launch-offer")
        page.goto(f"{admin}/post/{offer.pk}/change/")
        assert "goes out with the release “Spring launch”" in page.inner_text("#release-notice")
        screenshot(page, "release-post-notice")
        page.fill("#id_body", "Half price this week, and free shipping.")
        page.click("input[name=_continue]")
        stopped = page.locator(".messagelist .warning", has_text="This stops the release")
        stopped.wait_for()
        warning = stopped.inner_text()
        assert "This stops the release “Spring launch”" in warning
        assert "refresh this post's item" in warning
        screenshot(page, "release-stopped-by-save")
        page.goto(f"{live_server.url}/admin/releases/release/{release.pk}/change/")
        assert "will not go out until this is resolved" in page.inner_text("#release-problem")
        assert "“Launch offer”" in page.inner_text("#release-problem")
        screenshot(page, "release-stopped")
        page.locator("tr.release-item", has_text="Launch offer").locator(
            "button[value=refresh]"
        ).click()
        page.wait_for_selector(".messagelist .success")
        assert page.locator("#release-problem").count() == 0
        assert page.locator(".release-item-ready").count() == 3

        page.goto(f"{live_server.url}/posts/new-product/")
        assert page.locator("article").count() == 0, "not public before the launch"

        release.refresh_from_db()
        wait_until(lambda: database_now() >= release.release_at, timeout=30)
        run_publish_job(node="browser-node")  # the leader's tick, on the test server's database

        for slug, text in (
            ("new-product", "new product"),
            ("launch-offer", "free shipping"),
            ("pricing", "New prices."),
        ):
            page.goto(f"{live_server.url}/posts/{slug}/")
            assert text in page.inner_text("article")
        page.goto(f"{live_server.url}/admin/releases/release/{release.pk}/change/")
        assert "every item went live together" in page.inner_text("#release-state")
        screenshot(page, "release-released")
        page.goto(f"{live_server.url}/admin/releases/release/{release.pk}/history/")
        history = page.inner_text("#release-history")
        for step in ("Created", "Post added", "Scheduled", "Stopped", "Post refreshed", "Released"):
            assert step in history, step
        screenshot(page, "release-history")
    except BaseException:
        screenshot(page, request.node.name)
        raise
