"""The releases' admin: put a release together from the post list, read what stops it, and
schedule, refresh, remove or send it now; a stale page changes nothing; permissions."""

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from coordination.clock import database_now
from publishing import posts
from publishing.models import Post
from releases import actions as releases
from releases.models import Release
from tests.publishing.conftest import form_data, make_post

pytestmark = pytest.mark.django_db

S = Post.Status
RS = Release.Status
LIST = reverse("admin:publishing_post_changelist")
ADD_POSTS = reverse("admin:releases_release_add_posts")


def page_url(release) -> str:
    return reverse("admin:releases_release_change", args=[release.pk])


def act_url(release, **query) -> str:
    url = reverse("admin:releases_release_act", args=[release.pk])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_an_editor_makes_a_release_and_adds_posts_from_the_post_list(as_editor, editor):
    add = as_editor.post(
        reverse("admin:releases_release_add"),
        {"name": "Spring launch", "release_at_0": "", "release_at_1": "", "version": ""},
    )
    assert add.status_code == 302, add.content.decode()[:2000]
    release = Release.objects.get(name="Spring launch")
    assert (release.status, release.owner) == (RS.DRAFT, editor)
    first, second = make_post(title="First"), make_post(title="Second")

    chosen = as_editor.post(
        LIST,
        {"action": "add_to_release_action", "_selected_action": [first.pk, second.pk]},
    )
    assert chosen.status_code == 302 and chosen.url.startswith(ADD_POSTS)
    asked = as_editor.get(chosen.url)
    assert "First" in asked.content.decode() and "Second" in asked.content.decode()
    data = form_data(asked, "add-to-release")
    assert data["release"] == str(release.pk)
    added = as_editor.post(ADD_POSTS, data)
    assert added.url == page_url(release)
    assert "2 posts added to “Spring launch”." in said(added)
    assert set(release.items.values_list("post__title", flat=True)) == {"First", "Second"}

    page = as_editor.get(page_url(release)).content.decode()
    assert page.count("Ready, as it was when added") == 2
    assert 'value="schedule"' in page and 'value="release_now"' in page


def test_the_add_to_release_page_asks_as_many_queries_for_many_posts_as_for_one(as_editor, editor):
    releases.create_release(name="Held", user=editor)

    def queries_to_ask(n: int) -> int:
        ids = [make_post().pk for _ in range(n)]
        chosen = as_editor.post(LIST, {"action": "add_to_release_action", "_selected_action": ids})
        with CaptureQueriesContext(connection) as asked:
            assert as_editor.get(chosen.url).status_code == 200
        return len(asked)

    assert queries_to_ask(6) == queries_to_ask(1)


def test_the_page_says_what_stops_a_release_and_a_refresh_of_what_was_seen_resolves_it(
    as_editor, editor
):
    post = make_post(title="Pricing")
    release = releases.create_release(name="Launch", user=editor)
    releases.add_item(release=release, post=post, user=editor)
    releases.schedule_release(
        release=release, release_at=database_now() + timedelta(hours=1), user=editor
    )
    post.body = "Changed after review."
    posts.save_post(post=post, user=editor)

    page = as_editor.get(page_url(release)).content.decode()
    assert "This release will not go out until this is resolved" in page
    assert "The post was changed after it was added" in page
    seen = Post.objects.get(pk=post.pk).version
    assert f"seen={seen}" in page

    # A colleague changes the post again after this page was shown: the refresh is refused.
    posts.save_post(post=Post.objects.get(pk=post.pk), user=editor)
    item = release.items.get()
    refused = as_editor.post(act_url(release, item=item.pk, seen=seen), {"verb": "refresh"})
    assert any("Nothing was changed" in m for m in said(refused))
    assert Release.objects.get(pk=release.pk).problem

    seen = Post.objects.get(pk=post.pk).version
    done = as_editor.post(act_url(release, item=item.pk, seen=seen), {"verb": "refresh"})
    assert "“Pricing” will go out as it is now." in said(done)
    assert Release.objects.get(pk=release.pk).problem == ""


def test_release_now_from_a_page_a_colleague_changed_since_changes_nothing(as_editor, editor):
    release = releases.create_release(name="Launch", user=editor)
    releases.add_item(release=release, post=make_post(title="Seen"), user=editor)
    shown = form_data(as_editor.get(page_url(release)), "release-act")
    # A colleague adds a post the editor has not seen.
    unseen = make_post(title="Unseen")
    releases.add_item(release=release, post=unseen, user=editor)

    response = as_editor.post(act_url(release), {**shown, "verb": "release_now"})
    assert any("was changed by editor" in m for m in said(response))
    assert Release.objects.get(pk=release.pk).status == RS.DRAFT
    assert Post.objects.get(pk=unseen.pk).status == S.DRAFT

    shown = form_data(as_editor.get(page_url(release)), "release-act")
    done = as_editor.post(act_url(release), {**shown, "verb": "release_now"})
    assert "Released: every item went out together." in said(done)
    assert set(Post.objects.values_list("status", flat=True)) == {S.PUBLISHED}


def test_removing_an_item_never_conflicts_with_a_colleagues_other_change(as_editor, editor):
    release = releases.create_release(name="Launch", user=editor)
    gone = releases.add_item(release=release, post=make_post(title="Gone"), user=editor)
    shown = form_data(as_editor.get(page_url(release)), "release-act")
    releases.add_item(release=release, post=make_post(title="Kept"), user=editor)

    response = as_editor.post(act_url(release, item=gone.pk), {**shown, "verb": "remove"})
    assert "“Gone” was taken out of the release." in said(response)
    assert list(release.items.values_list("post_title", flat=True)) == ["Kept"]


def test_editors_who_may_not_publish_do_not_see_releases(as_drafter, editor):
    release = releases.create_release(name="Launch", user=editor)
    assert as_drafter.get(reverse("admin:releases_release_changelist")).status_code == 403
    assert as_drafter.get(page_url(release)).status_code == 403
    response = as_drafter.post(act_url(release), {"verb": "release_now"})
    assert response.status_code == 302
    assert Release.objects.get(pk=release.pk).status == RS.DRAFT


def test_two_editors_changing_a_release_at_once_keep_both_changes(as_editor, editor):
    release = releases.create_release(name="Launch", user=editor)
    opened = form_data(as_editor.get(page_url(release)), "release_form")
    # A colleague renames it after this page was shown.
    releases.edit_release(release=release, name="Spring launch", release_at=None, user=editor)

    mine = {**opened, "release_at_0": "2099-03-01", "release_at_1": "09:00:00"}
    merged = as_editor.post(page_url(release), mine)
    assert merged.status_code == 200
    html = merged.content.decode()
    assert "Nothing was saved. Their change and yours are merged" in html
    assert "Taken from the change by editor" in html
    release.refresh_from_db()
    assert (release.name, release.release_at) == ("Spring launch", None)

    again = form_data(merged, "release_form")
    assert (again["name"], again["release_at_0"]) == ("Spring launch", "2099-03-01")
    saved = as_editor.post(page_url(release), again)
    assert saved.status_code == 302
    release.refresh_from_db()
    assert release.name == "Spring launch"
    assert release.release_at.isoformat() == "2099-03-01T09:00:00+00:00"


def test_both_editors_renaming_a_release_choose_which_name_to_keep(as_editor, editor):
    release = releases.create_release(name="Launch", user=editor)
    opened = form_data(as_editor.get(page_url(release)), "release_form")
    releases.edit_release(release=release, name="Their name", release_at=None, user=editor)

    merged = as_editor.post(page_url(release), {**opened, "name": "My name"})
    html = merged.content.decode()
    assert "both changed the name: which do you want to keep?" in html
    assert "Please correct" not in html
    data = form_data(merged, "release_form")
    refused = as_editor.post(page_url(release), data)
    assert refused.status_code == 200 and "Choose which name to keep" in refused.content.decode()
    assert "Please correct" not in refused.content.decode()
    kept = as_editor.post(page_url(release), {**data, "keep_name": "mine"})
    assert kept.status_code == 302
    assert Release.objects.get(pk=release.pk).name == "My name"
