"""The admin's revisions page: schedule in the editor's zone (DST gaps refused), a stale page
refused, cancel, restore, compare (escaped), preview links; permissions."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from coordination.clock import database_now
from editors.models import EditorProfile
from publishing import previews, revisions
from publishing.models import Post, PostRevision
from tests.publishing.conftest import form_data, live_post, make_post

pytestmark = pytest.mark.django_db

R = PostRevision.Status


def revisions_url(post) -> str:
    return reverse("admin:publishing_post_revisions", args=[post.pk])


def schedule_form(client, post, **changes) -> dict:
    page = client.get(revisions_url(post))
    assert page.status_code == 200
    data = form_data_of(page)
    data.update(changes)
    return data


def form_data_of(page) -> dict:
    html = page.content.decode()
    # The schedule form has no id of its own; parse the section around it.
    start = html.index('<section id="schedule">')
    end = html.index("</section>", start)

    class Fake:
        content = ('<form id="f">' + html[start:end] + "</form>").encode()

    data = form_data(Fake, "f")
    data.pop("csrfmiddlewaretoken", None)
    return data


def test_the_change_page_links_to_the_revisions_and_names_a_scheduled_one(as_editor, editor):
    post = live_post()
    change = reverse("admin:publishing_post_change", args=[post.pk])
    assert revisions_url(post) in as_editor.get(change).content.decode()
    revisions.schedule_revision(
        post=post,
        title="Planned",
        body="b",
        publish_at=datetime(2099, 1, 1, 12, tzinfo=UTC),
        user=editor,
    )
    page = as_editor.get(change).content.decode()
    assert "Revision 2 is scheduled to go live at 2099-01-01 12:00:00 UTC" in page


def test_an_editor_schedules_a_revision_in_their_own_zone(as_editor, editor, settings):
    settings.TIME_ZONE = "UTC"
    EditorProfile.objects.create(user=editor, time_zone="Europe/Berlin")
    post = live_post(title="Live", body="Live body.")
    data = schedule_form(as_editor, post)
    assert (data["title"], data["body"]) == ("Live", "Live body."), "starts from the live text"
    data.update(
        title="Revised", body="Revised body.", publish_at_0="2099-07-01", publish_at_1="14:00:00"
    )
    response = as_editor.post(revisions_url(post), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    revision = post.revisions.get(status=R.SCHEDULED)
    assert revision.publish_at == datetime(2099, 7, 1, 12, tzinfo=UTC), "14:00 CEST"
    page = as_editor.get(revisions_url(post)).content.decode()
    assert "goes live Wed 1 Jul 2099, 14:00 CEST, in " in page
    assert "Times are in Europe/Berlin" in page


def test_a_time_in_a_dst_gap_is_refused_with_a_suggestion(as_editor, editor):
    EditorProfile.objects.create(user=editor, time_zone="Europe/Berlin")
    post = live_post()
    data = schedule_form(as_editor, post, publish_at_0="2099-03-29", publish_at_1="02:30:00")
    page = as_editor.post(revisions_url(post), data).content.decode()
    assert "02:30 does not exist on 2099-03-29 in Europe/Berlin" in page
    assert "did you mean 03:30?" in page
    assert not post.revisions.exists()


def test_a_stale_page_is_refused_and_keeps_the_editors_text(as_editor, editor):
    post = live_post()
    data = schedule_form(as_editor, post, title="Mine", publish_at_0="2099-01-01")
    data["publish_at_1"] = "12:00:00"
    revisions.schedule_revision(
        post=post,
        title="Theirs",
        body="b",
        publish_at=database_now() + timedelta(hours=1),
        user=editor,
    )
    page = as_editor.post(revisions_url(post), data).content.decode()
    assert "was changed by editor" in page and "Nothing was scheduled" in page
    assert 'value="Mine"' in page
    assert post.revisions.get(status=R.SCHEDULED).title == "Theirs"
    # Both changed the title and the time: scheduling again keeps what the editor chooses.
    data = form_data_of_page(page)
    data.update(publish_at_0="2099-01-01", publish_at_1="12:00:00")
    data.update(keep_title="mine", keep_publish_at="mine")
    assert as_editor.post(revisions_url(post), data).status_code == 302
    assert post.revisions.get(status=R.SCHEDULED).title == "Mine"


def form_data_of_page(html: str) -> dict:
    class Fake:
        content = html.encode()

    return form_data_of(Fake)


def test_cancel_and_restore_buttons(as_editor, editor):
    post = live_post(title="Original")
    revision = revisions.schedule_revision(
        post=post,
        title="Plan",
        body="b",
        publish_at=database_now() + timedelta(hours=1),
        user=editor,
    )
    version = Post.objects.get(pk=post.pk).version
    cancel = reverse("admin:publishing_post_revision_cancel", args=[post.pk, revision.number])
    stale = as_editor.post(cancel, {"version": version - 1}, follow=True).content.decode()
    assert "Nothing was changed" in stale
    assert PostRevision.objects.get(pk=revision.pk).status == R.SCHEDULED
    page = as_editor.post(cancel, {"version": version}, follow=True).content.decode()
    assert "Revision 2 was cancelled" in page
    assert PostRevision.objects.get(pk=revision.pk).status == R.CANCELLED

    restore = reverse("admin:publishing_post_revision_restore", args=[post.pk, 1])
    version = Post.objects.get(pk=post.pk).version
    page = as_editor.post(restore, {"version": version}, follow=True)
    assert "restored as draft revision 3" in page.content.decode()
    assert form_data_of(page)["title"] == "Original", "the form starts from the draft"


def test_compare_shows_an_escaped_word_diff(as_editor, editor):
    post = live_post(title="Old", body="Same line.\nOld line.")
    revisions.schedule_revision(
        post=post,
        title="New",
        body="Same line.\n<script>alert(1)</script>",
        publish_at=database_now() + timedelta(hours=1),
        user=editor,
    )
    url = reverse("admin:publishing_post_revision_compare", args=[post.pk])
    page = as_editor.get(url, {"a": 2, "b": 1}).content.decode()
    assert '<div class="removed"><del>Old line.</del></div>' in page
    assert '<div class="added"><ins>&lt;script&gt;alert(1)&lt;/script&gt;</ins></div>' in page
    assert "<script>alert(1)" not in page
    assert '<div class="same">Same line.</div>' in page
    assert '<div class="changed">Title: <del>Old</del><ins>New</ins></div>' in page
    bad = as_editor.get(url, {"a": 1, "b": 1}, follow=True).content.decode()
    assert "Choose two different revisions" in bad


def test_a_preview_link_is_made_shown_once_and_revoked(as_editor, client):
    post = make_post(title="Draft to share")
    url = reverse("admin:publishing_post_preview", args=[post.pk])
    page = as_editor.post(url, {"hours": "24"}, follow=True).content.decode()
    assert "New link, works for 24 hours" in page
    link = page.split('id="preview-url" type="text" readonly value="')[1].split('"')[0]
    assert link.startswith("http://testserver/preview/")
    assert "New link" not in as_editor.get(revisions_url(post)).content.decode(), "shown once"
    path = link.removeprefix("http://testserver")
    version = Post.objects.get(pk=post.pk).version
    revoke = reverse("admin:publishing_post_preview_revoke", args=[post.pk])
    as_editor.post(revoke, {"version": version, "confirmed": "yes"})
    as_editor.logout()
    assert as_editor.get(path).status_code == 404


def test_revoking_the_preview_links_asks_first(as_editor, editor, client):
    post = make_post(title="Draft to share")
    path = previews.preview_url(post=post, user=editor, expires_in=timedelta(hours=1))
    version = Post.objects.get(pk=post.pk).version
    revoke = reverse("admin:publishing_post_preview_revoke", args=[post.pk])
    assert f'action="{revoke}"' in as_editor.get(revisions_url(post)).content.decode()

    for asked in (
        as_editor.get(revoke, {"version": version}),
        as_editor.post(revoke, {"version": version}),
    ):
        page = asked.content.decode()
        assert asked.status_code == 200
        assert "Revoke all preview links of “Draft to share”?" in page
        assert (
            'name="confirmed" value="yes"' in page and f'name="version" value="{version}"' in page
        )
        assert f'href="{revisions_url(post)}#preview"' in page, "a way back without JavaScript"
        assert client.get(path).status_code == 200, "nothing is revoked before the editor confirms"

    done = as_editor.post(revoke, {"version": version, "confirmed": "yes"}, follow=True)
    assert "Every earlier preview link of this post is now dead." in done.content.decode()
    assert client.get(path).status_code == 404


def test_a_drafter_sees_revisions_but_cannot_schedule_or_cancel(as_drafter, editor):
    post = live_post()
    revision = revisions.schedule_revision(
        post=post,
        title="Plan",
        body="b",
        publish_at=database_now() + timedelta(hours=1),
        user=editor,
    )
    page = as_drafter.get(revisions_url(post)).content.decode()
    assert "Plan" in page and "Schedule a revision" not in page and 'value="Cancel"' not in page
    assert as_drafter.post(revisions_url(post), {"title": "x"}).status_code == 403
    cancel = reverse("admin:publishing_post_revision_cancel", args=[post.pk, revision.number])
    version = Post.objects.get(pk=post.pk).version
    assert as_drafter.post(cancel, {"version": version}).status_code == 403
    assert PostRevision.objects.get(pk=revision.pk).status == R.SCHEDULED


def test_the_history_shows_revision_events(as_editor, editor):
    post = live_post()
    revisions.schedule_revision(
        post=post,
        title="Plan",
        body="b",
        publish_at=database_now() + timedelta(hours=1),
        user=editor,
    )
    page = as_editor.get(reverse("admin:publishing_post_change", args=[post.pk])).content.decode()
    assert "Revision scheduled" in page


def test_with_review_on_the_schedule_form_says_a_text_needs_approval_first(as_editor, reviews_on):
    post = live_post(title="Live", body="Live body.")
    page = as_editor.get(revisions_url(post)).content.decode()
    assert 'id="revision-needs-approval"' in page and "Needs approval first" in page


def test_with_review_off_the_schedule_form_asks_no_approval(as_editor):
    post = live_post(title="Live", body="Live body.")
    assert "Needs approval first" not in as_editor.get(revisions_url(post)).content.decode()
