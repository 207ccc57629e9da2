"""A real browser with two tabs of one post: the stale tab's save is refused, its text kept.

Two browser contexts are two editors (separate sessions). One changes the post while the other
has its form open; the other then saves. Screenshots of the conflict page are saved under
``test-artifacts/`` so a person can check that it reads well.
"""

import pytest
from django.urls import reverse

from publishing.models import Post
from tests.publishing.conftest import due_post, make_post
from tests.support.browser import screenshot, signed_in
from tests.support.polling import wait_until
from tests.support.processes import process_env, start_scheduler

pytestmark = [pytest.mark.multiprocess, pytest.mark.sqlite]

S = Post.Status
TYPED = "Fixed a typo: *their* becomes *there*."


def conflict_text(page) -> str:
    page.wait_for_selector(".errornote")
    return page.locator("ul.errorlist.nonfield").inner_text()


def test_a_stale_live_tab_cannot_republish_a_post_a_colleague_took_down(
    live_server, admin_user, editor, browser, request
):
    post = make_post(status=S.PUBLISHED, title="Opening hours", body="We open at 9.")
    url = f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}"
    mine = signed_in(browser, live_server, "editor", "pw")
    theirs = signed_in(browser, live_server, admin_user.username, "password")
    try:
        mine.goto(url)
        theirs.goto(url)
        theirs.click("button[name=_publishing_action][value=unpublished]")
        theirs.wait_for_selector(".messagelist .success")
        assert Post.objects.get(pk=post.pk).status == S.UNPUBLISHED

        mine.fill("#id_body", TYPED)
        mine.click("input[name=_save]")
        message = conflict_text(mine)
        assert f"“Opening hours” was changed by {admin_user.username} at " in message
        assert "since you opened it; it is now Unpublished." in message
        assert "Nothing was saved." in message
        assert mine.input_value("#id_body") == TYPED, "the editor's text is kept"
        assert mine.input_value("#id_target_status") == S.UNPUBLISHED
        screenshot(mine, "conflict-stale-live-tab")
        current = Post.objects.get(pk=post.pk)
        assert (current.status, current.body) == (S.UNPUBLISHED, "We open at 9.")

        # Saving again, having read the message, keeps the text and leaves the post down.
        mine.click("input[name=_save]")
        mine.wait_for_selector(".messagelist .success")
        current = Post.objects.get(pk=post.pk)
        assert (current.status, current.body) == (S.UNPUBLISHED, TYPED)
    except BaseException:
        screenshot(mine, f"{request.node.name}-mine")
        screenshot(theirs, f"{request.node.name}-theirs")
        raise


def test_a_tab_open_while_the_scheduler_publishes_gets_the_conflict_not_an_invalid_choice(
    live_server, editor, browser, request
):
    post = due_post(seconds_ago=1, title="Launch day", body="It is *launch day*.")
    url = f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}"
    mine = signed_in(browser, live_server, "editor", "pw")
    scheduler = None
    try:
        mine.goto(url)
        assert mine.input_value("#id_target_status") == S.SCHEDULED
        scheduler = start_scheduler("browser-conflicts", "publishing", env=process_env())
        wait_until(
            lambda: Post.objects.get(pk=post.pk).status == S.PUBLISHED,
            timeout=30,
            message="the scheduler publishes the due post",
        )
        mine.fill("#id_title", "Launch day!")
        mine.fill("#id_body", TYPED)
        mine.click("input[name=_save]")
        message = conflict_text(mine)
        assert "was changed by Scheduler (node browser-conflicts) at " in message
        assert "it is now Published." in message
        assert "Select a valid choice" not in mine.content()
        assert mine.input_value("#id_title") == "Launch day!"
        assert mine.input_value("#id_body") == TYPED
        screenshot(mine, "conflict-published-by-the-scheduler")
        current = Post.objects.get(pk=post.pk)
        assert (current.title, current.status) == ("Launch day", S.PUBLISHED)
    except BaseException:
        screenshot(mine, request.node.name)
        raise
    finally:
        if scheduler is not None:
            scheduler.stop()


@pytest.fixture
def bob(db):
    """A second staff user who may publish: the colleague in the other browser."""
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user("bob", "bob@example.com", "pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="publishing"))
    return user


def test_saving_after_a_conflict_keeps_the_colleagues_title_and_my_body(
    live_server, editor, bob, browser, request
):
    post = make_post(title="Opening hours", body="We open at 9.")
    url = f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}"
    mine = signed_in(browser, live_server, "editor", "pw")
    theirs = signed_in(browser, live_server, "bob", "pw")
    try:
        mine.goto(url)
        theirs.goto(url)
        theirs.fill("#id_title", "Opening hours (summer)")
        theirs.click("input[name=_save]")
        theirs.wait_for_selector(".messagelist .success")

        mine.fill("#id_body", TYPED)
        mine.click("input[name=_save]")
        message = conflict_text(mine)
        assert "“Opening hours (summer)” was changed by bob at " in message
        assert "Nothing was saved. Their change and yours are merged" in message
        assert mine.input_value("#id_title") == "Opening hours (summer)", "their title"
        assert mine.input_value("#id_body") == TYPED, "my body"
        assert "Taken from the change by bob" in mine.locator("#merge").inner_text()
        screenshot(mine, "merge-their-title-my-body")
        assert Post.objects.get(pk=post.pk).body == "We open at 9.", "nothing saved yet"

        # Saving again, as the message invites, writes both changes.
        mine.click("input[name=_save]")
        mine.wait_for_selector(".messagelist .success")
        current = Post.objects.get(pk=post.pk)
        assert (current.title, current.body) == ("Opening hours (summer)", TYPED)
    except BaseException:
        screenshot(mine, f"{request.node.name}-mine")
        screenshot(theirs, f"{request.node.name}-theirs")
        raise


def test_a_title_both_changed_is_chosen_side_by_side(live_server, editor, bob, browser, request):
    post = make_post(title="Opening hours", body="We open at 9.")
    url = f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}"
    mine = signed_in(browser, live_server, "editor", "pw")
    theirs = signed_in(browser, live_server, "bob", "pw")
    try:
        mine.goto(url)
        theirs.goto(url)
        theirs.fill("#id_title", "Opening hours in summer")
        theirs.click("input[name=_save]")
        theirs.wait_for_selector(".messagelist .success")

        mine.fill("#id_title", "Summer opening hours")
        mine.fill("#id_body", TYPED)
        mine.click("input[name=_save]")
        conflict_text(mine)
        box = mine.locator("#merge-title")
        assert "Opening hours in summer" in box.locator(".merge-theirs").inner_text()
        assert "Summer opening hours" in box.locator(".merge-mine").inner_text()
        screenshot(mine, "merge-both-changed-the-title")

        # Saving without choosing saves nothing and asks which.
        mine.click("input[name=_save]")
        assert "Choose which title to keep: theirs or yours." in conflict_text(mine)
        assert Post.objects.get(pk=post.pk).title == "Opening hours in summer"

        mine.check("#merge-title input[value=theirs]")
        mine.click("input[name=_save]")
        mine.wait_for_selector(".messagelist .success")
        current = Post.objects.get(pk=post.pk)
        assert (current.title, current.body) == ("Opening hours in summer", TYPED)
    except BaseException:
        screenshot(mine, f"{request.node.name}-mine")
        screenshot(theirs, f"{request.node.name}-theirs")
        raise
