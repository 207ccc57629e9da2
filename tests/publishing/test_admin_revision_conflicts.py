"""A stale revisions page: the submission is merged with the change made since it was opened.

The editor opens a live post's revisions page (the form starts from the pending revision or
the live text); a colleague schedules another revision, or the publish job switches one in;
then the editor schedules theirs. The page comes back merged, nothing scheduled, and
scheduling from it writes both changes.
"""

from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils.html import strip_tags

from coordination.clock import database_now
from publishing import batches, posts, revisions
from publishing.models import PostRevision
from tests.publishing.conftest import form_data, live_post, make_due

pytestmark = pytest.mark.django_db

R = PostRevision.Status
LATER = datetime(2099, 1, 1, 12, tzinfo=UTC)
TYPED = "We open at 10 in the summer."


@pytest.fixture
def bob(db) -> User:
    """The colleague who schedules revisions while the editor's page is open."""
    user = User.objects.create_user("bob", "bob@example.com", "pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="publishing"))
    return User.objects.get(pk=user.pk)


def revisions_url(post) -> str:
    return reverse("admin:publishing_post_revisions", args=[post.pk])


def open_page(client, post) -> dict:
    page = client.get(revisions_url(post))
    assert page.status_code == 200
    return form_data(page, "revision_form")


def schedule_as(user, post, *, title, body, publish_at=LATER):
    post.refresh_from_db()
    return revisions.schedule_revision(
        post=post, title=title, body=body, publish_at=publish_at, user=user
    )


def scheduled(post) -> PostRevision:
    return post.revisions.get(status=R.SCHEDULED)


def test_a_colleagues_new_title_and_my_new_body_are_both_scheduled(as_editor, bob):
    post = live_post(title="Opening hours", body="We open at 9.")
    schedule_as(bob, post, title="Summer hours", body="We open at 9.")
    tab = open_page(as_editor, post)
    schedule_as(bob, post, title="Summer opening hours", body="We open at 9.")
    response = as_editor.post(revisions_url(post), {**tab, "body": TYPED})
    assert response.status_code == 200
    html = response.content.decode()
    assert "was changed by bob" in html and "Nothing was scheduled" in html
    assert scheduled(post).title == "Summer opening hours", "nothing scheduled yet"
    merged = form_data(response, "revision_form")
    assert (merged["title"], merged["body"]) == ("Summer opening hours", TYPED)
    assert "Taken from the change by bob" in html

    assert as_editor.post(revisions_url(post), merged).status_code == 302
    revision = scheduled(post)
    assert (revision.title, revision.body, revision.publish_at) == (
        "Summer opening hours",
        TYPED,
        LATER,
    )


def test_a_time_both_changed_is_scheduled_only_once_chosen(as_editor, bob):
    post = live_post(title="Opening hours", body="We open at 9.")
    schedule_as(bob, post, title="Summer hours", body="We open at 9.")
    tab = open_page(as_editor, post)
    theirs = LATER + timedelta(days=1)
    schedule_as(bob, post, title="Summer hours", body="We open at 9.", publish_at=theirs)
    response = as_editor.post(
        revisions_url(post), {**tab, "publish_at_0": "2099-01-03", "publish_at_1": "12:00:00"}
    )
    words = unescape(strip_tags(response.content.decode()))
    assert "Keep bob’s publish time" in words and "2099-01-02 12:00:00 UTC" in words
    assert "errorlist" not in response.content.decode()
    merged = form_data(response, "revision_form")
    refused = as_editor.post(revisions_url(post), merged)
    assert refused.status_code == 200
    words = unescape(strip_tags(refused.content.decode()))
    assert "Choose which publish time to keep: bob’s or yours." in words
    assert scheduled(post).publish_at == theirs

    chosen = {**form_data(refused, "revision_form"), "keep_publish_at": "mine"}
    assert as_editor.post(revisions_url(post), chosen).status_code == 302
    assert scheduled(post).publish_at == datetime(2099, 1, 3, 12, tzinfo=UTC)


def test_a_revision_the_scheduler_switched_in_meanwhile_counts_as_theirs(as_editor, bob):
    post = live_post(title="Opening hours", body="We open at 9.")
    revision = schedule_as(
        bob,
        post,
        title="Summer hours",
        body="We open at 9.",
        publish_at=database_now() + timedelta(hours=1),
    )
    tab = open_page(as_editor, post)
    make_due(revision)
    assert batches.switch_due_revisions(node="node-a").done
    response = as_editor.post(revisions_url(post), {**tab, "body": TYPED})
    html = response.content.decode()
    assert "was changed by Scheduler (node node-a)" in html
    merged = form_data(response, "revision_form")
    # The switched-in revision's time has passed; the page has no pending time any more.
    assert (merged["title"], merged["body"]) == ("Summer hours", TYPED)
    assert (merged["publish_at_0"], merged["publish_at_1"]) == ("", "")
    assert not post.revisions.filter(status=R.SCHEDULED).exists()

    merged.update(publish_at_0="2099-01-01", publish_at_1="12:00:00")
    assert as_editor.post(revisions_url(post), merged).status_code == 302
    assert (scheduled(post).title, scheduled(post).body) == ("Summer hours", TYPED)


def test_a_post_taken_down_meanwhile_keeps_the_editors_text_on_the_page(as_editor, bob):
    post = live_post(title="Opening hours", body="We open at 9.")
    tab = open_page(as_editor, post)
    posts.unpublish_now(post=post, user=bob)
    response = as_editor.post(revisions_url(post), {**tab, "body": TYPED})
    assert response.status_code == 200, "not a 403 that loses the text"
    html = response.content.decode()
    assert "is Unpublished now" in html and "Nothing was scheduled" in html
    assert TYPED in html
    assert not post.revisions.filter(status=R.SCHEDULED).exists()


def test_a_conflict_found_only_under_the_row_lock_is_merged_too(as_editor, bob):
    """A colleague's revision that lands after the form's check is caught by the services."""
    from unittest import mock

    from publishing import forms

    post = live_post(title="Opening hours", body="We open at 9.")
    schedule_as(bob, post, title="Summer hours", body="We open at 9.")
    tab = open_page(as_editor, post)
    schedule_as(bob, post, title="Summer opening hours", body="We open at 9.")
    real = forms.edit_conflict
    calls = []

    def misses_the_first_time(current, expected):
        calls.append(expected)
        return None if len(calls) == 1 else real(current, expected)

    with mock.patch.object(forms, "edit_conflict", side_effect=misses_the_first_time):
        response = as_editor.post(revisions_url(post), {**tab, "body": TYPED})
    assert len(calls) == 2, "the form was merged again after the services refused"
    assert response.status_code == 200
    merged = form_data(response, "revision_form")
    assert (merged["title"], merged["body"]) == ("Summer opening hours", TYPED)
    assert scheduled(post).title == "Summer opening hours"
