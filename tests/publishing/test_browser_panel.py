"""In Chromium: the post page's publishing panel says where the post is, in the editor's
zone, and offers as buttons only what that state allows (none to a drafter).

Screenshots go to ``test-artifacts/`` so a person can check that the panel reads well.
"""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from coordination.clock import database_now
from editors.models import EditorProfile
from publishing import posts
from publishing.models import Post
from tests.publishing.conftest import due_post, make_post
from tests.support.browser import screenshot, signed_in

pytestmark = [pytest.mark.sqlite]

S = Post.Status
ACTION = "button[name=_publishing_action]"


def sign_in(browser, live_server, username: str):
    """A page signed in as ``username``, the browser's own clock in UTC."""
    return signed_in(browser, live_server, username, timezone_id="UTC")


def change_url(live_server, post: Post) -> str:
    return f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}"


def panel(page) -> str:
    return page.inner_text("fieldset.publishing-panel")


def buttons(page) -> list[str]:
    return [b.strip() for b in page.locator(ACTION).all_inner_texts()]


def test_an_editor_schedules_unschedules_and_publishes_from_the_panel(
    live_server, editor, browser, request
):
    EditorProfile.objects.create(user=editor, time_zone="Asia/Tokyo")
    post = make_post(title="Opening hours")
    page = sign_in(browser, live_server, "editor")
    try:
        page.goto(change_url(live_server, post))
        assert "Draft: the public does not see it" in panel(page)
        assert buttons(page) == ["Schedule", "Publish now"]
        assert "Set status to" not in page.content()
        screenshot(page, "panel-draft")

        tokyo = timezone.get_fixed_timezone(9 * 60)
        when = (database_now() + timedelta(hours=3, minutes=12, seconds=30)).astimezone(tokyo)
        page.fill("#id_publish_at_0", f"{when:%Y-%m-%d}")
        page.fill("#id_publish_at_1", f"{when:%H:%M:%S}")
        page.click(f"{ACTION}[value=scheduled]")
        message = page.inner_text(".messagelist .success")
        assert "“Opening hours”: Scheduled: goes live" in message
        assert f"{when.day} {when:%b}, {when:%H:%M} JST, in 3 h 12 min" in message
        assert "changed successfully" not in message
        assert page.url == change_url(live_server, post), "a panel button stays on the post"
        assert Post.objects.get(pk=post.pk).status == S.SCHEDULED
        assert "Scheduled: goes live" in panel(page)
        assert buttons(page) == ["Publish now", "Unschedule"]
        screenshot(page, "panel-scheduled")

        # Enter in the title saves the text and never presses a publishing button.
        page.fill("#id_title", "Opening hours (winter)")
        page.press("#id_title", "Enter")
        page.wait_for_selector(".messagelist .success")
        current = Post.objects.get(pk=post.pk)
        assert (current.title, current.status) == ("Opening hours (winter)", S.SCHEDULED)

        page.goto(change_url(live_server, post))
        page.click(f"{ACTION}[value=draft]")
        assert "Draft" in page.inner_text(".messagelist .success")
        assert Post.objects.get(pk=post.pk).status == S.DRAFT

        page.click(f"{ACTION}[value=published]")
        assert "Live since" in page.inner_text(".messagelist .success")
        assert "Live since" in panel(page) and " JST" in panel(page)
        assert buttons(page) == ["Take down"]
        assert page.get_attribute("text=Schedule a revision", "href") == reverse(
            "admin:publishing_post_revisions", args=[post.pk]
        )
        screenshot(page, "panel-live")

        page.click(f"{ACTION}[value=unpublished]")
        assert "Taken down on" in panel(page)
        assert buttons(page) == ["Schedule", "Publish now"]
        screenshot(page, "panel-taken-down")
    except BaseException:
        screenshot(page, request.node.name)
        raise


def test_a_late_post_says_so_and_a_drafter_sees_no_publishing_buttons(
    live_server, editor, drafter, browser, request
):
    EditorProfile.objects.create(user=editor, time_zone="Asia/Tokyo")
    late = due_post(seconds_ago=250, title="Late launch")
    page = sign_in(browser, live_server, "editor")
    drafter_page = sign_in(browser, live_server, "drafter")
    try:
        page.goto(change_url(live_server, late))
        text = panel(page)
        assert "Late: was due" in text and "JST (4 min" in text
        assert "the scheduler has not published it yet" in text
        screenshot(page, "panel-late")

        draft = make_post(title="A drafter's draft")
        drafter_page.goto(change_url(live_server, draft))
        assert "Draft" in panel(drafter_page)
        assert buttons(drafter_page) == []
        screenshot(drafter_page, "panel-drafter")
        posts.schedule_post(post=draft, publish_at=database_now() + timedelta(days=1), user=editor)
        drafter_page.goto(change_url(live_server, draft))
        assert "Scheduled: goes live" in panel(drafter_page)
        assert buttons(drafter_page) == []
    except BaseException:
        screenshot(page, f"{request.node.name}-editor")
        screenshot(drafter_page, f"{request.node.name}-drafter")
        raise
