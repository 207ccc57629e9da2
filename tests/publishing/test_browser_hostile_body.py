"""A real browser: a hostile body saved in the admin is served at once.

24,000 characters of ``[a](b `` took 4.2 s per page view when Markdown was rendered on every
request; now the admin's save renders it once and the public page only reads the stored HTML.
A screenshot of the public page is saved under ``test-artifacts/``.
"""

import pytest

from tests.support.browser import screenshot, signed_in

pytestmark = [pytest.mark.multiprocess, pytest.mark.sqlite]

HOSTILE = "Intro *before* the hostile part.\n\n" + "[a](b " * 4000


def test_a_hostile_body_saved_in_the_admin_is_shown_on_the_public_page(
    live_server, admin_user, browser, request
):
    page = signed_in(browser, live_server, admin_user.username, "password")
    try:
        page.goto(f"{live_server.url}/admin/publishing/post/add/")
        page.fill("#id_title", "A hostile body")
        page.fill("#id_slug", "a-hostile-body")
        page.fill("#id_body", HOSTILE)
        page.click("button[name=_publishing_action][value=published]")
        page.wait_for_selector(".messagelist .success")

        page.goto(f"{live_server.url}/")
        assert "Intro before the hostile part." in page.content()
        page.click("text=A hostile body")
        page.wait_for_selector("article.post em")
        assert page.inner_text("article.post em") == "before"
        assert "[a](b [a](b" in page.inner_text("article.post")
        screenshot(page, request.node.name)
    except BaseException:
        screenshot(page, request.node.name)
        raise
