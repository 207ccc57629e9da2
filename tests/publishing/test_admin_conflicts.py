"""Stale admin tabs: a form saved after someone else changed the post writes nothing.

Each test opens the change form (the editor's tab), lets a colleague or the publish job change
the post, then submits the tab. The page comes back with "changed by NAME at TIME since you
opened it", the editor's typed text still in the form, and the post exactly as the colleague
left it. Submitting the form shown with the conflict saves the text deliberately, without
turning the status the editor never touched into a transition.
"""

from datetime import timedelta
from html import unescape

import pytest
from django.contrib.auth.models import Permission, User
from django.db.models import Max
from django.test import override_settings
from django.urls import reverse
from django.utils.html import strip_tags

from coordination.clock import database_now
from publishing import batches, posts, revisions
from publishing.history import local_time
from publishing.models import Post
from tests.publishing.conftest import due_post, form_data, future_post, make_due, make_post

pytestmark = pytest.mark.django_db

S = Post.Status
TYPED = "A typo fix the editor typed"


def change_url(post: Post) -> str:
    return reverse("admin:publishing_post_change", args=[post.pk])


@pytest.fixture
def bob(db) -> User:
    """The colleague who changes the post while the editor's tab is open."""
    user = User.objects.create_user("bob", "bob@example.com", "pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="publishing"))
    return User.objects.get(pk=user.pk)


def open_tab(client, post: Post) -> dict[str, str]:
    page = client.get(change_url(post))
    assert page.status_code == 200
    return form_data(page)


def snapshot(post: Post) -> dict:
    return Post.objects.filter(pk=post.pk).values().get()


def assert_conflict(response, post: Post, by: str, typed: str = TYPED) -> str:
    """Check the page is the form again with the conflict message and the typed text."""
    assert response.status_code == 200, "the form should be shown again"
    html = response.content.decode()
    current = Post.objects.get(pk=post.pk)
    # The message names the latest change: the post's or its latest event's (on PostgreSQL
    # Now() is each statement's time, so the two can fall in different seconds).
    last_event = current.events.aggregate(at=Max("at"))["at"]
    when = local_time(max(filter(None, [current.updated_at, last_event])))
    assert f"was changed by {by} at {when} since you opened it" in html
    assert f"it is now {current.get_status_display()}" in html
    assert typed in html, "the editor's text is kept"
    assert "Select a valid choice" not in html
    assert "must be in the future" not in html
    return html


@override_settings(TIME_ZONE="Europe/Berlin")
def test_a_stale_live_tab_does_not_republish_an_unpublished_post(as_editor, bob):
    post = make_post(status=S.PUBLISHED, title="Live")
    tab = open_tab(as_editor, post)
    posts.unpublish_now(post=post, user=bob)
    before = snapshot(post)
    response = as_editor.post(change_url(post), {**tab, "title": TYPED})
    html = assert_conflict(response, post, "bob")
    assert "CET" in html or "CEST" in html, "the time is in the editor's zone"
    assert snapshot(post) == before

    # Saving the form shown with the conflict keeps the text, and the post stays down.
    again = form_data(response)
    assert again["target_status"] == S.UNPUBLISHED
    assert as_editor.post(change_url(post), again).status_code == 302
    post.refresh_from_db()
    assert (post.title, post.status) == (TYPED, S.UNPUBLISHED)


def test_a_stale_draft_tab_does_not_cancel_a_schedule(as_editor, bob):
    post = make_post()
    tab = open_tab(as_editor, post)
    posts.schedule_post(post=post, publish_at=database_now() + timedelta(hours=1), user=bob)
    before = snapshot(post)
    response = as_editor.post(change_url(post), {**tab, "body": TYPED})
    assert_conflict(response, post, "bob")
    assert snapshot(post) == before


def test_a_stale_unpublished_tab_does_not_take_a_republished_post_down(as_editor, bob):
    post = make_post(status=S.UNPUBLISHED)
    tab = open_tab(as_editor, post)
    posts.publish_now(post=post, user=bob)
    before = snapshot(post)
    response = as_editor.post(change_url(post), {**tab, "title": TYPED})
    assert_conflict(response, post, "bob")
    assert snapshot(post) == before


def test_a_stale_scheduled_tab_does_not_reschedule_a_cancelled_post(as_editor, bob):
    post = future_post()
    tab = open_tab(as_editor, post)
    posts.cancel_schedule(post=post, user=bob)
    before = snapshot(post)
    later = database_now() + timedelta(days=2)
    response = as_editor.post(
        change_url(post),
        {**tab, "body": TYPED, "publish_at_0": f"{later:%Y-%m-%d}", "publish_at_1": "10:00:00"},
    )
    assert_conflict(response, post, "bob")
    assert snapshot(post) == before


def test_two_tabs_editing_one_body_do_not_overwrite_each_other(client, editor, bob):
    post = make_post(body="The original body")
    client.force_login(editor)
    tab_1 = open_tab(client, post)
    tab_2 = open_tab(client, post)
    client.force_login(bob)
    assert client.post(change_url(post), {**tab_2, "body": "Bob's body"}).status_code == 302
    client.force_login(editor)
    response = client.post(change_url(post), {**tab_1, "body": TYPED})
    assert_conflict(response, post, "bob")
    assert Post.objects.get(pk=post.pk).body == "Bob's body"


def test_a_form_without_its_version_is_refused(as_editor):
    post = make_post()
    tab = open_tab(as_editor, post)
    del tab["version"]
    response = as_editor.post(change_url(post), {**tab, "body": TYPED})
    assert response.status_code == 200
    assert "reload" in response.content.decode()
    assert Post.objects.get(pk=post.pk).body != TYPED


# --- item 2: the publish job or a publisher acted while the form was open -------------------


def test_published_by_the_scheduler_while_open_is_a_conflict_not_an_invalid_choice(as_editor):
    post = future_post(title="Soon")
    tab = open_tab(as_editor, post)
    Post.objects.filter(pk=post.pk).update(publish_at=database_now() - timedelta(seconds=1))
    assert batches.publish_due(node="node-a").done == [post.pk]
    before = snapshot(post)
    response = as_editor.post(change_url(post), {**tab, "title": TYPED})
    assert_conflict(response, post, "Scheduler (node node-a)")
    assert snapshot(post) == before


def test_unpublished_by_the_scheduler_while_open_is_a_conflict_not_a_past_time(as_editor):
    now = database_now()
    post = make_post(
        status=S.PUBLISHED,
        publish_at=now - timedelta(hours=1),
        unpublish_at=now + timedelta(hours=1),
    )
    tab = open_tab(as_editor, post)
    # The unpublish time comes and the job takes the post down.
    Post.objects.filter(pk=post.pk).update(unpublish_at=database_now() - timedelta(seconds=1))
    assert batches.unpublish_due(node="node-b").done == [post.pk]
    response = as_editor.post(change_url(post), {**tab, "title": TYPED})
    assert_conflict(response, post, "Scheduler (node node-b)")
    assert Post.objects.get(pk=post.pk).status == S.UNPUBLISHED


def test_a_drafters_tab_on_a_draft_a_publisher_scheduled_is_a_conflict_not_a_403(as_drafter, bob):
    post = make_post()
    tab = open_tab(as_drafter, post)
    posts.schedule_post(post=post, publish_at=database_now() + timedelta(hours=1), user=bob)
    before = snapshot(post)
    response = as_drafter.post(change_url(post), {**tab, "body": TYPED})
    html = assert_conflict(response, post, "bob")
    assert "you cannot edit it now" in html
    assert snapshot(post) == before
    # Submitting again is still refused: the post is no longer the drafter's to change.
    again = as_drafter.post(change_url(post), form_data(response))
    assert again.status_code in (200, 403)
    assert snapshot(post) == before


def test_a_conflict_found_only_under_the_row_lock_writes_nothing(as_editor, bob):
    """A colleague's change that lands after the form's check is caught by the services."""
    from unittest import mock

    from publishing import forms

    post = make_post(status=S.PUBLISHED)
    tab = open_tab(as_editor, post)
    posts.unpublish_now(post=post, user=bob)
    before = snapshot(post)
    real = forms.edit_conflict
    calls = []

    def misses_the_first_time(current, expected):
        calls.append(expected)
        return None if len(calls) == 1 else real(current, expected)

    with mock.patch.object(forms, "edit_conflict", side_effect=misses_the_first_time):
        response = as_editor.post(change_url(post), {**tab, "title": TYPED})
    assert len(calls) == 2, "the form was shown again after the services refused"
    assert_conflict(response, post, "bob")
    assert snapshot(post) == before


def test_the_conflict_page_shows_the_history_that_explains_it(as_editor, bob):
    post = make_post(status=S.PUBLISHED)
    tab = open_tab(as_editor, post)
    posts.unpublish_now(post=post, user=bob)
    html = as_editor.post(change_url(post), {**tab, "title": TYPED}).content.decode()
    history = html[html.index("Publish history") :]
    assert "Unpublished" in history and ">bob<" in history


# --- a stale form is merged with the colleague's change -------------------------------------


def save_as(user, post: Post, **values) -> Post:
    """Save a colleague's change of the post's content through the services."""
    current = Post.objects.get(pk=post.pk)
    for name, value in values.items():
        setattr(current, name, value)
    return posts.save_post(post=current, user=user, expected_version=current.version)


def merge_box(html: str) -> str:
    assert 'id="merge"' in html, "the merge is shown"
    return html[html.index('id="merge"') : html.index("</div>\n", html.index("Nothing is saved"))]


def merge_words(html: str) -> str:
    """Return the merge's text as the editor reads it: no tags, marks or entities."""
    return unescape(strip_tags(merge_box(html)))


def assert_a_question(html: str) -> None:
    """Check the merge reads as a question, not as a form error."""
    assert "Please correct" not in html
    assert 'class="errornote"' not in html and "errorlist" not in html
    assert "<title>Error:" not in html


def test_a_colleagues_title_and_my_body_are_merged_and_saving_writes_both(as_editor, bob):
    post = make_post(title="Opening hours", body="We open at 9.")
    tab = open_tab(as_editor, post)
    save_as(bob, post, title="Opening hours (summer)")
    before = snapshot(post)
    response = as_editor.post(change_url(post), {**tab, "body": TYPED})
    assert_conflict(response, post, "bob")
    assert snapshot(post) == before, "nothing is saved before the editor sees the merge"
    merged = form_data(response)
    assert (merged["title"], merged["body"]) == ("Opening hours (summer)", TYPED)
    html = response.content.decode()
    assert_a_question(html)
    words = merge_words(html)
    assert "While you were editing, bob changed it too: keep both changes?" in words
    assert "Taken from the change by bob" in words and "Opening hours (summer)" in words
    assert response.context["original"].title == "Opening hours (summer)", "the post as it is"

    assert as_editor.post(change_url(post), merged).status_code == 302
    post.refresh_from_db()
    assert (post.title, post.body) == ("Opening hours (summer)", TYPED)


@pytest.mark.parametrize("keep", ["theirs", "mine"])
def test_a_title_both_changed_is_shown_side_by_side_and_saved_only_once_chosen(
    as_editor, bob, keep
):
    post = make_post(title="Opening hours", body="We open at 9.")
    tab = open_tab(as_editor, post)
    save_as(bob, post, title="Bob's title")
    response = as_editor.post(
        change_url(post), {**tab, "title": "My title", "body": "We open at 10."}
    )
    html = response.content.decode()
    assert_a_question(html)
    words = merge_words(html)
    assert "You and bob both changed the title: which do you want to keep?" in words
    assert "Keep bob’s title" in words and "Bob's title" in words
    assert "Keep your title" in words and "My title" in words
    merged = form_data(response)
    assert (merged["title"], merged["body"]) == ("My title", "We open at 10.")
    assert "keep_title" not in merged, "nothing is chosen for the editor"

    # Saving without choosing saves nothing and asks again.
    before = snapshot(post)
    refused = as_editor.post(change_url(post), merged)
    assert refused.status_code == 200
    assert_a_question(refused.content.decode())
    words = merge_words(refused.content.decode())
    assert "Choose which title to keep: bob’s or yours." in words
    assert "You and bob both changed the title" in words, "still named, not 'your colleague'"
    assert snapshot(post) == before

    chosen = {**form_data(refused), "keep_title": keep}
    assert as_editor.post(change_url(post), chosen).status_code == 302
    post.refresh_from_db()
    expected = {"theirs": "Bob's title", "mine": "My title"}[keep]
    assert (post.title, post.body) == (expected, "We open at 10.")


def test_a_change_both_made_alike_is_no_conflict(as_editor, bob):
    post = make_post(title="Opening hours")
    tab = open_tab(as_editor, post)
    save_as(bob, post, title="Opening times")
    response = as_editor.post(change_url(post), {**tab, "title": "Opening times"})
    assert "both changed" not in merge_box(response.content.decode())
    assert as_editor.post(change_url(post), form_data(response)).status_code == 302


def test_my_status_choice_survives_a_colleagues_title_change(as_editor, bob):
    post = make_post(title="Opening hours")
    tab = open_tab(as_editor, post)
    save_as(bob, post, title="Opening hours (summer)")
    response = as_editor.post(change_url(post), {**tab, "target_status": S.PUBLISHED})
    merged = form_data(response)
    assert (merged["title"], merged["target_status"]) == ("Opening hours (summer)", S.PUBLISHED)
    assert Post.objects.get(pk=post.pk).status == S.DRAFT
    assert as_editor.post(change_url(post), merged).status_code == 302
    post.refresh_from_db()
    assert (post.title, post.status) == ("Opening hours (summer)", S.PUBLISHED)


def test_a_scheduled_revision_switched_in_while_open_counts_as_theirs(as_editor, editor):
    post = make_post(status=S.PUBLISHED, title="Opening hours", body="We open at 9.")
    revision = revisions.schedule_revision(
        post=post,
        title="Opening hours (summer)",
        body="We open at 9.",
        publish_at=database_now() + timedelta(hours=1),
        user=editor,
    )
    tab = open_tab(as_editor, post)
    make_due(revision)
    assert batches.switch_due_revisions(node="node-a").done
    response = as_editor.post(change_url(post), {**tab, "body": TYPED})
    assert_conflict(response, post, "Scheduler (node node-a)")
    merged = form_data(response)
    assert (merged["title"], merged["body"]) == ("Opening hours (summer)", TYPED)
    assert as_editor.post(change_url(post), merged).status_code == 302
    post.refresh_from_db()
    assert (post.title, post.body, post.status) == ("Opening hours (summer)", TYPED, S.PUBLISHED)


def test_published_by_the_job_while_open_counts_as_theirs_and_says_what_cannot_be_kept(
    as_editor,
):
    post = due_post(seconds_ago=1, title="Launch day")
    tab = open_tab(as_editor, post)
    later = database_now() + timedelta(days=3)
    assert batches.publish_due(node="node-a").done == [post.pk]
    before = snapshot(post)
    response = as_editor.post(
        change_url(post),
        {**tab, "body": TYPED, "publish_at_0": f"{later:%Y-%m-%d}", "publish_at_1": "10:00:00"},
    )
    assert_conflict(response, post, "Scheduler (node node-a)")
    assert snapshot(post) == before
    box = merge_box(response.content.decode())
    assert "Your publish time (" in box and "cannot be kept" in box
    assert "both changed" not in box
    assert "Status: Published" in box
    merged = form_data(response)
    assert (merged["body"], merged["target_status"]) == (TYPED, S.PUBLISHED)
    assert as_editor.post(change_url(post), merged).status_code == 302
    post.refresh_from_db()
    assert (post.body, post.status, post.publish_at) == (TYPED, S.PUBLISHED, before["publish_at"])


def test_a_forged_base_is_not_used(as_editor, bob):
    """The opened values are signed: an edited copy counts as no base, and every difference
    between the editor's form and the post is shown side by side."""
    post = make_post(title="Opening hours", body="We open at 9.")
    tab = open_tab(as_editor, post)
    save_as(bob, post, title="Bob's title")
    forged = tab["opened"][:-3] + ("abc" if not tab["opened"].endswith("abc") else "xyz")
    response = as_editor.post(change_url(post), {**tab, "opened": forged, "body": TYPED})
    assert "Keep bob’s title" in merge_words(response.content.decode())
    assert form_data(response)["title"] == "Opening hours", "the editor's value, not guessed"


def test_a_conflict_left_unchosen_stays_one_when_the_post_changes_again(as_editor, bob):
    post = make_post(title="Opening hours", body="We open at 9.")
    tab = open_tab(as_editor, post)
    save_as(bob, post, title="Bob's title")
    merged = form_data(as_editor.post(change_url(post), {**tab, "title": "My title"}))
    save_as(bob, post, body="Bob's body")  # a second change before the editor chose
    response = as_editor.post(change_url(post), merged)
    html = response.content.decode()
    assert "was changed by bob" in html
    again = form_data(response)
    assert (again["title"], again["body"]) == ("My title", "Bob's body")
    assert 'name="keep_title"' in merge_box(html), "the title still needs a choice"
    assert as_editor.post(change_url(post), again).status_code == 200
    assert Post.objects.get(pk=post.pk).title == "Bob's title"


def test_a_panel_button_pressed_on_a_stale_tab_is_kept_and_the_merged_forms_save_does_it(
    as_editor, bob
):
    post = make_post(title="Opening hours")
    tab = open_tab(as_editor, post)
    save_as(bob, post, title="Opening hours (summer)")
    response = as_editor.post(change_url(post), {**tab, "_publishing_action": S.PUBLISHED})
    html = response.content.decode()
    assert "Your choice “Publish now” is kept: Save carries it out" in html
    merged = form_data(response)
    assert merged["target_status"] == S.PUBLISHED
    assert Post.objects.get(pk=post.pk).status == S.DRAFT, "nothing was done yet"
    assert as_editor.post(change_url(post), merged).status_code == 302
    post.refresh_from_db()
    assert (post.title, post.status) == ("Opening hours (summer)", S.PUBLISHED)
