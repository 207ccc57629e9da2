"""In Chromium, as an editor reads them: which revision is live now, the compare page's word
diff (light and dark), a preview whose revision has gone live, revoking links after a
confirmation, and "View on site" of a draft. Screenshots go to ``test-artifacts/``.
"""

from datetime import UTC, datetime

from publishing import previews, revisions
from tests.publishing.conftest import live_post, make_due, make_post, run_publish_job
from tests.support.browser import screenshot, signed_in

FIRST = (
    "Our spring programme opens in March with three talks.\n\n"
    "Tickets cost 10 euros and are sold at the door.\n\n"
    "The café stays open until nine."
)
SECOND = (
    "Our spring programme opens in April with four talks.\n\n"
    "Tickets cost 12 euros and are sold online and at the door.\n\n"
    "The café stays open until nine.\n\n"
    "Children under twelve come in free."
)


def test_an_editor_reads_which_revision_is_live_and_what_changed(
    live_server, editor, browser, request
):
    post = live_post(title="Spring programme", slug="spring-programme", body=FIRST)
    page = signed_in(browser, live_server, "editor", "pw")
    revisions_page = f"{live_server.url}/admin/publishing/post/{post.pk}/revisions/"
    try:
        revision = revisions.schedule_revision(
            post=post,
            title=post.title,
            body=SECOND,
            publish_at=datetime(2099, 1, 1, tzinfo=UTC),
            user=editor,
        )
        link = live_server.url + previews.preview_url(
            post=post, user=editor, expires_in=previews.MAX_LIFETIME
        )
        make_due(revision)
        run_publish_job(node="browser-node")
        page.goto(revisions_page)
        assert page.inner_text("#revision-2 .status") == "Live now"
        assert page.inner_text("#revision-1 .status").startswith("Was live from ")
        screenshot(page, "revisions-live-now")

        page.click("input[value='Compare the two chosen revisions']")
        changed = page.locator("#diff .changed")
        assert changed.first.locator("del").all_inner_texts() == ["March", "three"]
        assert changed.first.locator("ins").all_inner_texts() == ["April", "four"]
        assert page.inner_text("#diff .added >> nth=-1") == "Children under twelve come in free."
        assert "@@" not in page.inner_text("#content")
        removed = page.locator("#diff del").first
        assert "line-through" in removed.evaluate("e => getComputedStyle(e).textDecorationLine")
        screenshot(page, "compare-word-diff")
        compare_url = page.url

        dark = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark")
        dark.add_cookies(page.context.cookies())
        dark_page = dark.new_page()
        dark_page.goto(compare_url)
        background = dark_page.locator("#diff").evaluate("e => getComputedStyle(e).backgroundColor")
        assert background != "rgb(255, 255, 255)", "the diff follows the admin's dark mode"
        screenshot(dark_page, "compare-word-diff-dark")

        stranger = browser.new_context(viewport={"width": 1000, "height": 700}).new_page()
        stranger.goto(link)
        banner = stranger.inner_text(".preview-banner")
        assert banner.startswith("This revision is live now")
        assert "not published" not in banner
        screenshot(stranger, "preview-live-now")
        stranger.click(".preview-banner a")
        assert stranger.url == f"{live_server.url}/posts/spring-programme/"
    except BaseException:
        screenshot(page, request.node.name)
        raise


def test_revoking_preview_links_asks_first_and_view_on_site_of_a_draft_previews_it(
    live_server, editor, browser, request
):
    post = make_post(title="Autumn programme", slug="autumn-programme", body="To be *announced*.")
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(f"{live_server.url}/admin/publishing/post/{post.pk}/revisions/")
        page.click("input[value='Revoke all preview links']")
        assert page.inner_text("#content h1") == "Revoke all preview links of “Autumn programme”?"
        screenshot(page, "revoke-confirmation")
        page.click("text=No, take me back")
        assert page.url.endswith(f"/admin/publishing/post/{post.pk}/revisions/#preview")
        page.click("input[value='Revoke all preview links']")
        page.click("input[value='Yes, revoke all preview links']")
        assert "now dead" in page.inner_text(".messagelist:not(.publishing-banner)")

        page.goto(f"{live_server.url}/admin/publishing/post/{post.pk}/change/")
        page.click("a.viewsitelink")
        assert "/preview/" in page.url
        assert "not published: draft" in page.inner_text(".preview-banner")
        assert "To be announced." in page.inner_text("article")
        screenshot(page, "view-on-site-draft")
    except BaseException:
        screenshot(page, request.node.name)
        raise
