"""In Chromium: an editor opens "See the site at…" from the calendar, picks tomorrow morning in
their zone, reads the front page as it will be then (a scheduled post on it, a post due to be
taken down gone, a banner saying what changed), opens a post, and leaves; and a scheduled
release's page opens the site as it will be when the release goes out; and from the post list
an editor shares a moment with someone without an account, who opens the link and reads it.

Screenshots go to ``test-artifacts/`` so a person can check that the pages read well.
"""

from datetime import timedelta

from django.utils import timezone

from coordination.clock import database_now
from releases import actions as releases
from releases.models import Release
from tests.publishing.conftest import future_post, live_post, make_post
from tests.support.browser import screenshot, signed_in


def due_ten_minutes_before(moment, *, title: str, body: str):
    """A post scheduled to go live ten minutes before ``moment``."""
    now = database_now()
    return future_post(seconds_ahead=(moment - now).total_seconds() - 600, title=title, body=body)


def see_the_site_at(page, start_url: str, moment) -> None:
    """From ``start_url`` open "See the site at…", pick ``moment``'s day and time (in the
    editor's zone) and wait for the banner."""
    page.goto(start_url)
    page.click("#site-at-link")
    page.fill("#site-at-day", moment.strftime("%Y-%m-%d"))
    page.fill("#site-at-time", moment.strftime("%H:%M"))
    page.click("#site-at-form button[type=submit]")
    page.wait_for_selector("#site-at-banner")


def test_an_editor_sees_the_site_as_it_will_be_tomorrow_morning(live_server, editor, browser):
    now = database_now()
    tomorrow = timezone.localtime(now + timedelta(days=1)).replace(hour=9, minute=30)
    live_post(title="Opening hours", body="We open at nine.")
    live_post(title="Winter sale", body="Ends tonight.", unpublish_at=now + timedelta(hours=1))
    due_ten_minutes_before(tomorrow, title="Spring menu", body="Our **spring** menu is here.")
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        see_the_site_at(page, f"{live_server.url}/admin/publishing/post/calendar/", tomorrow)
        banner = page.inner_text("#site-at-banner")
        assert "The site as it will be at" in banner and "09:30" in banner
        assert "Spring menu goes live" in banner and "Winter sale is taken down" in banner
        listed = page.inner_text("main")
        assert "Spring menu" in listed and "Opening hours" in listed
        assert "Winter sale" not in listed
        screenshot(page, "site-at-index")
        page.click("main >> text=Spring menu")
        page.wait_for_selector("article.post")
        assert "Our spring menu is here." in page.inner_text("article.post")
        assert page.locator("#site-at-banner").is_visible()
        screenshot(page, "site-at-post")
        page.click("#site-at-leave")
        page.wait_for_selector("#site-at-link")
    finally:
        page.close()


def test_a_release_page_opens_the_site_when_it_goes_out(live_server, editor, browser):
    draft = make_post(title="New product", body="It is here.")
    release = releases.create_release(name="Launch", user=editor)
    releases.add_item(release=release, post=draft, user=editor)
    releases.schedule_release(
        release=release, release_at=database_now() + timedelta(days=3), user=editor
    )
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(f"{live_server.url}/admin/releases/release/{release.pk}/change/")
        page.click("#release-site-at")
        page.wait_for_selector("#site-at-banner")
        assert "New product goes live" in page.inner_text("#site-at-banner")
        assert "the release “Launch”" in page.inner_text("#site-at-banner")
        assert "New product" in page.inner_text("main")
        screenshot(page, "site-at-release")
    finally:
        page.close()
    assert Release.objects.get(pk=release.pk).status == Release.Status.SCHEDULED


def test_an_editor_shares_a_moment_from_the_post_list(live_server, editor, browser):
    later = timezone.localtime(database_now() + timedelta(days=2)).replace(hour=8, minute=0)
    due_ten_minutes_before(later, title="Autumn menu", body="Pumpkin soup, every day.")
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        see_the_site_at(page, f"{live_server.url}/admin/publishing/post/", later)
        page.fill("#id_hours", "2")
        page.click("#site-at-make-link")
        link = page.input_value("#site-at-shared-url")
        assert "works for 2 hours" in page.inner_text("#site-at-share")
        screenshot(page, "site-at-shared-link-made")
    finally:
        page.close()
    guest = browser.new_context().new_page()
    try:
        guest.goto(link)
        banner = guest.inner_text("#site-at-banner")
        assert "A preview shared with you" in banner and "Autumn menu goes live" in banner
        assert guest.locator("#site-at-leave").count() == 0
        guest.click("main >> text=Autumn menu")
        guest.wait_for_selector("article.post")
        assert "Pumpkin soup, every day." in guest.inner_text("article.post")
        screenshot(guest, "site-at-shared-link-opened")
    finally:
        guest.close()
