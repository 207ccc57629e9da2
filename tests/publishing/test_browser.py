"""A real browser: an editor schedules a post in the admin and sees it go live.

Playwright for Python drives Debian's Chromium (``apt-get install chromium``; no browser
download). The scheduler is a real ``runscheduler`` process. On failure a screenshot is saved
under ``test-artifacts/`` (git-ignored).
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.clock import database_now
from tests.support.browser import chromium, screenshot
from tests.support.processes import process_env, start_scheduler

pytestmark = [pytest.mark.multiprocess, pytest.mark.sqlite]


@pytest.fixture
def browser_page():
    with chromium() as browser:
        yield browser.new_page()


def test_editor_schedules_a_post_and_it_appears_on_the_public_index(
    live_server, admin_user, browser_page, request, monkeypatch
):
    # Playwright's sync API runs an event loop; the ORM calls below happen outside it.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    page = browser_page
    scheduler = start_scheduler("browser-node", "publishing", env=process_env())
    try:
        scheduler.wait_for_log("running groups")
        page.goto(f"{live_server.url}/admin/login/")
        page.fill("#id_username", admin_user.username)
        page.fill("#id_password", "password")
        page.click("input[type=submit]")
        page.wait_for_selector("#site-name")

        page.goto(f"{live_server.url}/admin/publishing/post/add/")
        page.fill("#id_title", "Hello from the browser")
        page.fill("#id_slug", "hello-from-the-browser")
        page.fill("#id_body", "Scheduled *in a real browser*.")
        when = timezone.localtime(database_now() + timedelta(seconds=6))
        page.fill("#id_publish_at_0", when.strftime("%Y-%m-%d"))
        page.fill("#id_publish_at_1", when.strftime("%H:%M:%S"))
        page.click("button[name=_publishing_action][value=scheduled]")
        page.wait_for_selector(".messagelist .success")

        page.goto(f"{live_server.url}/")
        assert "Hello from the browser" not in page.content(), "not live before its time"
        for _ in range(60):
            page.goto(f"{live_server.url}/")
            if "Hello from the browser" in page.content():
                break
            page.wait_for_timeout(500)
        assert "Hello from the browser" in page.content()
        page.click("text=Hello from the browser")
        assert "in a real browser" in page.content()
    except BaseException:
        screenshot(page, request.node.name)
        raise
    finally:
        scheduler.stop()
