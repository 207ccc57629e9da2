"""In Chromium: an editor schedules a revision of a live post and sees the live page switch
when the publish job runs; a preview link opens in a fresh browser context with no login.

Screenshots go to ``test-artifacts/`` so a person can check that the pages read well.
"""

from datetime import timedelta

from django.utils import timezone

from coordination.clock import database_now
from publishing.models import PostRevision
from tests.publishing.conftest import live_post, make_post, run_publish_job
from tests.support.browser import screenshot, signed_in
from tests.support.polling import wait_until


def test_an_editor_schedules_a_revision_and_the_live_page_switches(
    live_server, editor, browser, request
):
    post = live_post(title="Launch notes", slug="launch-notes", body="The *first* version.")
    page = signed_in(browser, live_server, "editor", "pw")
    public = f"{live_server.url}/posts/launch-notes/"
    try:
        page.goto(f"{live_server.url}/admin/publishing/post/{post.pk}/change/")
        page.click("text=Revisions and preview")
        page.fill("#id_title", "Launch notes, revised")
        page.fill("#id_body", "The *second* version, with corrections.")
        when = timezone.localtime(database_now() + timedelta(seconds=8))
        page.fill("#id_publish_at_0", when.strftime("%Y-%m-%d"))
        page.fill("#id_publish_at_1", when.strftime("%H:%M:%S"))
        page.click("input[name=_schedule]")
        page.wait_for_selector(".messagelist .success")
        assert "goes live" in page.inner_text(".messagelist .success")
        assert "Scheduled" in page.inner_text("#revision-2")
        screenshot(page, "revision-scheduled")

        page.goto(public)
        assert "first version" in page.inner_text("article"), "the live version until its time"

        revision = PostRevision.objects.get(post=post, number=2)
        wait_until(lambda: database_now() >= revision.publish_at, timeout=30)
        run_publish_job(node="browser-node")  # the leader's tick, on the test server's database

        page.goto(public)
        assert "second version, with corrections" in page.inner_text("article")
        assert page.inner_text("article h1") == "Launch notes, revised"
        screenshot(page, "revision-live")

        page.goto(f"{live_server.url}/admin/publishing/post/{post.pk}/revisions/")
        assert "Live now" in page.inner_text("#revision-2")
        assert "Was live from" in page.inner_text("#revision-1")
        page.click("input[value='Compare the two chosen revisions']")
        changed = page.locator("#diff .changed")
        assert changed.nth(1).inner_text() == "The *firstsecond* version, with corrections."
        assert changed.nth(1).locator("del").all_inner_texts() == ["first"]
        assert changed.nth(1).locator("ins").all_inner_texts() == ["second", ", with corrections"]
        screenshot(page, "revision-compare")
    except BaseException:
        screenshot(page, request.node.name)
        raise


def test_a_preview_link_opens_without_login_and_is_marked(live_server, editor, browser, request):
    post = make_post(title="Embargoed story", body="Not public *yet*.")
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(f"{live_server.url}/admin/publishing/post/{post.pk}/revisions/")
        page.select_option("#id_hours", "1")
        page.click("input[value='Get a preview link']")
        page.wait_for_selector("#preview-url")
        link = page.input_value("#preview-url")
        screenshot(page, "preview-link")

        stranger = browser.new_context(viewport={"width": 1000, "height": 700}).new_page()
        response = stranger.goto(link)
        assert response.status == 200
        assert response.headers["x-robots-tag"] == "noindex, nofollow"
        assert stranger.get_attribute("meta[name=robots]", "content") == "noindex, nofollow"
        assert "Preview" in stranger.inner_text(".preview-banner")
        assert "Embargoed story" in stranger.inner_text("article h1")
        assert "Not public yet." in stranger.inner_text("article")
        screenshot(stranger, "preview-page")
        assert stranger.goto(f"{live_server.url}/posts/{post.slug}/").status == 404
        assert stranger.goto(f"{live_server.url}/admin/").url.endswith("/admin/login/?next=/admin/")
    except BaseException:
        screenshot(page, request.node.name)
        raise
