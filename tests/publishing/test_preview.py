"""Preview links: signed, expiring, revocable; the page is marked, not indexed, not cached;
a bad link is the site's ordinary 404, byte for byte."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core import signing
from django.core.exceptions import PermissionDenied

from coordination.clock import database_now
from publishing import posts, previews, revisions
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import live_post, make_due, make_post, run_publish_job

pytestmark = pytest.mark.django_db

S = Post.Status
HOUR = timedelta(hours=1)


@pytest.fixture
def not_found(client):
    """The site's 404 for an address that never existed, to compare bad links against."""
    response = client.get("/posts/there-is-no-such-post/")
    assert response.status_code == 404
    return response


def assert_ordinary_404(response, not_found) -> None:
    assert response.status_code == 404
    assert response.content == not_found.content, "a bad link must look like any other 404"
    for header in ("Content-Type", "Cache-Control", "X-Robots-Tag", "Referrer-Policy"):
        assert response.get(header) == not_found.get(header), header


def test_a_preview_link_is_a_signed_path_that_shows_a_draft_to_anyone(client, editor):
    post = make_post(title="Secret plans", body="Not *yet* public.")
    path = previews.preview_url(post=post, user=editor, expires_in=HOUR)
    assert path.startswith("/preview/") and path.endswith("/")
    assert client.get(f"/posts/{post.slug}/").status_code == 404, "the draft is not public"

    response = client.get(path)  # no one signed in
    assert response.status_code == 200
    page = response.content.decode()
    assert "Secret plans" in page and "Not <em>yet</em> public." in page
    assert "Preview" in page and "not published: draft" in page
    assert '<meta name="robots" content="noindex, nofollow">' in page
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
    assert "public" not in response["Cache-Control"]
    assert response["Referrer-Policy"] == "no-referrer", "the link must not leak to other sites"


def test_a_preview_shows_the_scheduled_revision_of_a_live_post(client, editor):
    post = live_post(title="Live title", body="Live body.")
    revisions.schedule_revision(
        post=post,
        title="Next title",
        body="Next body.",
        publish_at=database_now() + HOUR,
        user=editor,
    )
    page = client.get(previews.preview_url(post=post, user=editor, expires_in=HOUR))
    text = page.content.decode()
    assert "Next body." in text and "Live body." not in text
    assert "revision 2, scheduled" in text
    assert "Live body." in client.get(f"/posts/{post.slug}/").content.decode()


def test_an_expired_link_is_an_ordinary_404(client, editor, not_found):
    post = make_post()
    made_two_hours_ago = database_now() - 2 * HOUR
    path = previews.preview_url(post=post, user=editor, expires_in=HOUR, now=made_two_hours_ago)
    assert_ordinary_404(client.get(path), not_found)
    fresh = previews.preview_url(post=post, user=editor, expires_in=HOUR)
    assert client.get(fresh).status_code == 200


def test_a_tampered_link_is_an_ordinary_404(client, editor, not_found):
    post = make_post()
    other = make_post()
    path = previews.preview_url(post=post, user=editor, expires_in=HOUR)
    token = path.split("/")[2]
    payload = signing.loads(token, salt=previews.SALT)
    forged = signing.dumps({**payload, "p": other.pk}, salt="another.salt")
    extended = token[:-1] + ("A" if token[-1] != "A" else "B")
    for bad in (forged, extended, "nonsense", signing.dumps(payload)):
        assert_ordinary_404(client.get(f"/preview/{bad}/"), not_found)


def test_revoking_kills_every_earlier_link_of_the_post_only(client, editor, not_found):
    post = make_post()
    other = make_post()
    old = previews.preview_url(post=post, user=editor, expires_in=HOUR)
    others = previews.preview_url(post=other, user=editor, expires_in=HOUR)
    version = Post.objects.get(pk=post.pk).version
    previews.revoke_preview_links(post=post, user=editor, expected_version=version)
    assert_ordinary_404(client.get(old), not_found)
    assert client.get(others).status_code == 200
    assert (
        client.get(previews.preview_url(post=post, user=editor, expires_in=HOUR)).status_code == 200
    )
    event = PublishEvent.objects.get(post=post, kind=PublishEvent.Kind.PREVIEWS_REVOKED)
    assert event.user == editor


def test_a_deleted_posts_link_is_an_ordinary_404(client, editor, not_found):
    post = make_post()
    path = previews.preview_url(post=post, user=editor, expires_in=HOUR)
    post.delete()
    assert_ordinary_404(client.get(path), not_found)


def test_only_editors_may_make_or_revoke_links(db):
    from django.contrib.auth.models import User

    reader = User.objects.create_user("reader", password="pw", is_staff=True)
    post = make_post()
    with pytest.raises(PermissionDenied, match="publishing.change_post"):
        previews.preview_url(post=post, user=reader, expires_in=HOUR)
    with pytest.raises(PermissionDenied):
        previews.revoke_preview_links(post=post, user=reader)


@pytest.mark.parametrize("lifetime", [timedelta(0), -HOUR, timedelta(days=31)])
def test_a_lifetime_out_of_range_is_a_clear_error(editor, lifetime):
    with pytest.raises(ValueError, match="expires_in must be more than 0 and at most 30 days"):
        previews.preview_url(post=make_post(), user=editor, expires_in=lifetime)


def test_the_link_survives_edits_and_shows_the_latest_text(client, editor):
    post = make_post(title="First draft")
    path = previews.preview_url(post=post, user=editor, expires_in=HOUR)
    post.title = "Second draft"
    posts.save_post(post=post, user=editor)
    assert "Second draft" in client.get(path).content.decode()


def test_the_preview_of_a_revision_that_has_gone_live_says_so_and_links_the_page(client, editor):
    post = live_post(title="Notes", slug="notes", body="first")
    revision = revisions.schedule_revision(
        post=post,
        title="Notes",
        body="second",
        publish_at=datetime(2099, 1, 1, tzinfo=UTC),
        user=editor,
    )
    path = previews.preview_url(post=post, user=editor, expires_in=HOUR)
    assert "not published: revision 2, scheduled" in client.get(path).content.decode()

    make_due(revision)
    run_publish_job()
    page = client.get(path).content.decode()
    assert "This revision is live now" in page
    assert 'href="/posts/notes/"' in page
    assert "not published" not in page


def test_the_preview_of_a_live_post_says_it_is_live_now(client, editor):
    post = live_post(title="Notes", slug="live-notes", body="only")
    page = client.get(
        previews.preview_url(post=post, user=editor, expires_in=HOUR)
    ).content.decode()
    assert "This post is live now" in page and 'href="/posts/live-notes/"' in page
    assert "not published" not in page


def _take_down_by_hand(post, editor) -> None:
    posts.unpublish_now(post=post, user=editor)


def _take_down_at_its_time(post, editor) -> None:
    Post.objects.filter(pk=post.pk).update(unpublish_at=database_now() - timedelta(seconds=1))
    run_publish_job()


def _take_down_with_a_release(post, editor) -> None:
    from releases import actions as releases

    release = releases.create_release(name="Takedown", user=editor)
    releases.add_item(release=release, post=post, action="unpublish", user=editor)
    releases.release_now(release=release, user=editor)


@pytest.mark.parametrize(
    "take_down", [_take_down_by_hand, _take_down_at_its_time, _take_down_with_a_release]
)
def test_a_takedown_ends_the_posts_preview_links(client, editor, not_found, take_down):
    post = live_post(title="Embargo lifted too soon", body="Text taken down.")
    path = previews.preview_url(post=post, user=editor, expires_in=HOUR)
    assert client.get(path).status_code == 200
    take_down(post, editor)
    assert Post.objects.get(pk=post.pk).status == S.UNPUBLISHED
    assert_ordinary_404(client.get(path), not_found)
