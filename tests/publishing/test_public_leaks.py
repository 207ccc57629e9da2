"""Small leaks of non-public information, each closed.

The admin's "view on site" redirect must not hand a draft's address to staff who may not see
the post; the feed names people, never their login; the public cache validators move only with
what the public sees; and bodies cannot load images from other sites unless the operator says so.
"""

import pytest
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.test import override_settings
from django.urls import reverse

from publishing import posts
from publishing.models import Post
from publishing.rendering import render_markdown
from tests.publishing.conftest import _staff, make_post
from tests.publishing.test_public import FEED, INDEX

pytestmark = pytest.mark.django_db

S = Post.Status


def view_on_site_url(post_id: int) -> str:
    content_type = ContentType.objects.get_for_model(Post)
    return reverse("admin:view_on_site", args=[content_type.pk, post_id])


# --- /admin/r/<content type>/<id>/ -----------------------------------------------------------


def test_view_on_site_does_not_reveal_a_draft_to_staff_without_view_permission(client):
    draft = make_post(slug="secret-draft-slug")
    client.force_login(_staff("outsider", []))
    found = client.get(view_on_site_url(draft.pk))
    missing = client.get(view_on_site_url(draft.pk + 1000))
    assert found.status_code == 404
    assert "secret-draft-slug" not in found.get("Location", "")
    assert "secret-draft-slug" not in found.content.decode()
    assert missing.status_code == found.status_code, "existing and missing ids look the same"


def test_view_on_site_still_works_for_staff_who_may_view_the_post(client, editor):
    post = make_post(slug="visible-post", status=S.PUBLISHED)
    client.force_login(editor)
    response = client.get(view_on_site_url(post.pk))
    assert response.status_code == 302
    assert response["Location"].endswith("/posts/visible-post/")


def test_view_on_site_of_another_model_needs_its_view_permission(client):
    other = User.objects.create_user("someone-else")
    content_type = ContentType.objects.get_for_model(User)
    client.force_login(_staff("outsider", []))
    url = reverse("admin:view_on_site", args=[content_type.pk, other.pk])
    assert client.get(url).status_code == 404


# --- the feed's authors ----------------------------------------------------------------------


def test_the_feed_never_shows_login_names(client):
    nameless = User.objects.create_user("jdoe-login", is_staff=True)
    named = User.objects.create_user("asmith-login", first_name="Ada", last_name="Smith")
    make_post(status=S.PUBLISHED, slug="by-nameless", author=nameless)
    make_post(status=S.PUBLISHED, slug="by-named", author=named)
    feed = client.get(FEED).content.decode()
    assert "jdoe-login" not in feed and "asmith-login" not in feed
    assert "<name>Ada Smith</name>" in feed
    assert "<name>Instatic</name>" in feed, "a post whose author has no name gets the site's"


# --- public ETag / Last-Modified --------------------------------------------------------------


def test_editing_a_post_the_public_cannot_see_leaves_the_public_validators_alone(client, editor):
    make_post(status=S.PUBLISHED, slug="live")
    draft = make_post(slug="a-draft")
    gone = make_post(status=S.UNPUBLISHED, slug="taken-down", published_at=None)
    first = client.get(INDEX)
    for post in (draft, gone):
        post.body = "edited where nobody can see it"
        posts.save_post(post=post, user=editor)
        again = client.get(INDEX, headers={"if-none-match": first["ETag"]})
        assert again.status_code == 304, f"editing the {post.status} post changed the ETag"
        again = client.get(INDEX, headers={"if-modified-since": first["Last-Modified"]})
        assert again.status_code == 304, f"editing the {post.status} post moved Last-Modified"


def test_taking_a_post_down_still_changes_the_validators(client, editor):
    make_post(status=S.PUBLISHED, slug="stays")
    goes = make_post(status=S.PUBLISHED, slug="goes")
    first = client.get(INDEX)
    posts.unpublish_now(post=goes, user=editor)
    assert client.get(INDEX, headers={"if-none-match": first["ETag"]}).status_code == 200


# --- external images ---------------------------------------------------------------------------

EXTERNAL_IMAGES = [
    "![pixel](https://tracker.example/p.gif)",
    "![pixel](http://tracker.example/p.gif)",
    '<img src="//tracker.example/p.gif" alt="pixel">',
    '<img src="HTTPS://tracker.example/p.gif">',
    '<img src="&#47;&#47;tracker.example/p.gif">',
    '<img src="/\\tracker.example/p.gif">',
    '<img src="/&#9;/tracker.example/p.gif">',
]


@pytest.mark.parametrize("body", EXTERNAL_IMAGES)
def test_external_images_are_removed_by_default(body):
    assert "tracker.example" not in render_markdown(body)


def test_images_from_the_site_itself_are_kept():
    assert 'src="/static/chart.png"' in render_markdown("![chart](/static/chart.png)")


@pytest.mark.parametrize("body", EXTERNAL_IMAGES)
@override_settings(INSTATIC_ALLOW_EXTERNAL_IMAGES=True)
def test_external_images_can_be_allowed(body):
    assert "tracker.example/p.gif" in render_markdown(body)


def test_links_to_other_sites_are_not_images_and_are_kept():
    assert 'href="https://example.com/"' in render_markdown("[a site](https://example.com/)")
