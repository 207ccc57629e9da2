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
    """Return what the merge above the form says, having checked it is no form error."""
    page.wait_for_selector("#merge")
    assert page.locator(".errornote:visible").count() == 0, "a question, not 'Please correct…'"
    assert "Please correct" not in page.content()
    return page.locator("#merge").inner_text()


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


def two_tabs(browser, live_server, post):
    """Return the post's page opened by the editor and by bob, each signed in on their own."""
    url = f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}"
    mine = signed_in(browser, live_server, "editor", "pw")
    theirs = signed_in(browser, live_server, "bob", "pw")
    mine.goto(url)
    theirs.goto(url)
    return mine, theirs


def test_saving_after_a_conflict_keeps_the_colleagues_title_and_my_body(
    live_server, editor, bob, browser, request
):
    post = make_post(title="Opening hours", body="We open at 9.")
    mine, theirs = two_tabs(browser, live_server, post)
    try:
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
        assert mine.locator("#editor-restore").count() == 0, "the merge, not a second question"
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
    mine, theirs = two_tabs(browser, live_server, post)
    try:
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
        assert "Choose which title to keep: bob’s or yours." in conflict_text(mine)
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


def test_both_changed_texts_are_a_question_with_the_differences_marked(
    live_server, editor, bob, browser, request
):
    """Bob (Bob Builder) and the editor both rewrite the title and a line of the body: the
    page asks which to keep, names him each time, and marks the words that differ."""
    bob.first_name, bob.last_name = "Bob", "Builder"
    bob.save()
    body = "We open at 9.\n\nThe café is on the first floor.\n\nDogs are welcome."
    post = make_post(title="Opening hours", body=body)
    mine, theirs = two_tabs(browser, live_server, post)
    try:
        theirs.fill("#id_title", "Opening hours in summer")
        theirs.fill("#id_body", body.replace("at 9", "at 8").replace("first", "ground"))
        theirs.click("input[name=_save]")
        theirs.wait_for_selector(".messagelist .success")

        mine.fill("#id_title", "Summer opening hours")
        mine.fill("#id_body", body.replace("at 9", "at 10"))
        mine.click("input[name=_save]")
        said = conflict_text(mine)
        assert (
            "You and Bob Builder both changed the title and the body: which do you want to keep?"
            in said
        )
        assert "was changed by Bob Builder at " in said
        box = mine.locator("#merge-body")
        assert box.locator(".merge-theirs mark").all_inner_texts() == ["8", "ground"]
        assert box.locator(".merge-mine mark").all_inner_texts() == ["10", "first"]
        assert "Dogs are welcome." in box.locator(".merge-theirs").inner_text()
        assert "Keep Bob Builder’s body" in box.inner_text()
        screenshot(mine, "merge-a-question-with-the-differences-marked")

        # Saving without choosing asks again, still naming him.
        mine.click("input[name=_save]")
        said = conflict_text(mine)
        assert "Choose which title and body to keep: Bob Builder’s or yours." in said
        assert "You and Bob Builder both changed" in said and "colleague" not in said
        screenshot(mine, "merge-a-question-asked-again")
        assert Post.objects.get(pk=post.pk).body.startswith("We open at 8.")
        # Nothing is saved yet, so leaving by a link asks first.
        questions = []
        mine.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
        mine.click(".breadcrumbs a >> nth=-1")
        assert questions and "not saved" in questions[0]

        mine.check("#merge-title input[value=theirs]")
        mine.check("#merge-body input[value=mine]")
        mine.click("input[name=_save]")
        mine.wait_for_selector(".messagelist .success")
        current = Post.objects.get(pk=post.pk)
        assert (current.title, current.body.replace("\r\n", "\n")) == (
            "Opening hours in summer",
            body.replace("at 9", "at 10"),
        )
    except BaseException:
        screenshot(mine, f"{request.node.name}-mine")
        screenshot(theirs, f"{request.node.name}-theirs")
        raise
