"""The embargo, asked by an anonymous visitor at each step of a post's life: an image is
nobody's but the editors' until a post showing it is live, public from the instant it is,
and private again when no live post shows it."""

from datetime import timedelta

import pytest
from django.test import Client

from coordination.clock import database_now
from media.models import ImageUse
from publishing import batches, posts, previews
from publishing.models import Post
from releases import actions as releases
from tests.media.conftest import make_image
from tests.publishing.conftest import make_post

pytestmark = pytest.mark.django_db(transaction=True)


def status_for(client: Client, url: str) -> int:
    return client.get(url).status_code


def draft_with(image, editor, *, title="Launch") -> Post:
    """Create a draft showing ``image``."""
    return posts.save_post(
        post=Post(title=title, slug=title.lower(), body=f"Hello\n\n{image.markdown()}\n"),
        user=editor,
    )


def test_an_image_is_public_exactly_while_a_post_showing_it_is_live(editor, client):
    image = make_image(editor)
    anonymous = Client()
    staff = Client()
    staff.force_login(editor)
    assert status_for(anonymous, image.url) == 404, "uploaded, used nowhere: embargoed"
    post = draft_with(image, editor)
    assert status_for(anonymous, image.url) == 404, "in a draft"
    answer = staff.get(image.url)
    assert answer.status_code == 200 and answer["Cache-Control"].startswith("private")

    soon = database_now() + timedelta(hours=1)
    post = posts.schedule_post(post=post, publish_at=soon, user=editor)
    assert status_for(anonymous, image.url) == 404, "in a scheduled post"

    Post.objects.filter(pk=post.pk).update(publish_at=database_now() - timedelta(seconds=1))
    assert status_for(anonymous, image.url) == 404, "due but not published yet"
    assert batches.publish_due(node="test").done == [post.pk]
    answer = anonymous.get(image.url)
    assert answer.status_code == 200, "the publish job put the post live"
    assert answer["Cache-Control"].startswith("public")
    assert answer["Content-Type"] == "image/jpeg"
    width = image.widths[0]
    assert status_for(anonymous, f"/media/{image.key}/{width}/{image.name}") == 200

    post.refresh_from_db()
    posts.unpublish_now(post=post, user=editor)
    assert status_for(anonymous, image.url) == 404, "taken down: embargoed again"


def test_a_live_post_that_stops_showing_the_image_makes_it_private(editor):
    image = make_image(editor)
    post = draft_with(image, editor)
    post = posts.publish_now(post=post, user=editor)
    assert status_for(Client(), image.url) == 200
    post.body = "No picture any more."
    posts.save_post(post=post, user=editor)
    assert status_for(Client(), image.url) == 404


def test_an_unpublish_time_that_passes_ends_it_without_the_job(editor):
    image = make_image(editor)
    post = posts.publish_now(post=draft_with(image, editor), user=editor)
    assert status_for(Client(), image.url) == 200
    Post.objects.filter(pk=post.pk).update(unpublish_at=database_now() - timedelta(seconds=1))
    assert status_for(Client(), image.url) == 404, "the public pages' rule: not live"


def test_another_live_post_keeps_it_public(editor):
    image = make_image(editor)
    first = posts.publish_now(post=draft_with(image, editor, title="One"), user=editor)
    posts.publish_now(post=draft_with(image, editor, title="Two"), user=editor)
    posts.unpublish_now(post=first, user=editor)
    assert status_for(Client(), image.url) == 200


def test_a_posts_text_that_mentions_the_image_without_the_index_does_not_leak_it(editor):
    image = make_image(editor)
    # Written around the services: the index never heard of it, so it stays private.
    make_post(status=Post.Status.PUBLISHED, body=image.markdown())
    assert status_for(Client(), image.url) == 404


def test_a_featured_image_is_public_with_its_live_post(editor, client):
    image = make_image(editor)
    post = posts.save_post(post=Post(title="F", slug="f", body="Text."), user=editor)
    client.force_login(editor)
    answer = client.post(f"/admin/media/image/featured/{post.pk}/", {"key": image.key})
    assert answer.status_code == 200
    assert status_for(Client(), image.url) == 404
    posts.publish_now(post=post, user=editor)
    assert status_for(Client(), image.url) == 200
    page = Client().get(post.get_absolute_url()).content.decode()
    assert f'<figure class="featured"><img src="{image.url}"' in page


def test_a_preview_link_shows_the_embargoed_image_to_its_reader(editor):
    image = make_image(editor)
    post = draft_with(image, editor)
    url = previews.preview_url(post=post, user=editor, expires_in=timedelta(hours=1))
    page = Client().get(url).content.decode()
    marker = f'src="{image.url}?preview='
    assert marker in page
    token_url = page.split('src="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    assert status_for(Client(), token_url) == 200
    assert status_for(Client(), image.url) == 404
    other = make_image(editor, alt="Another")
    assert (
        status_for(
            Client(), token_url.replace(image.key, other.key).replace(image.name, other.name)
        )
        == 404
    )


@pytest.mark.parametrize(
    "path",
    [
        "/media/0123456789abcdef0123/x.jpg",
        "/media/not-a-key/x.jpg",
        "/media/0123456789abcdef0123/480/x.jpg",
    ],
)
def test_made_up_addresses_are_the_same_404(path):
    assert status_for(Client(), path) == 404


def test_wrong_names_and_widths_of_a_real_image_are_404_for_editors_too(editor, client):
    image = make_image(editor)
    client.force_login(editor)
    assert client.get(f"/media/{image.key}/other.jpg").status_code == 404
    assert client.get(f"/media/{image.key}/333/{image.name}").status_code == 404
    assert client.get(image.url, HTTP_ACCEPT="image/webp,*/*").headers["Content-Type"] == (
        "image/webp"
    )


def test_a_post_created_with_an_image_names_it_from_its_first_save(editor):
    image = make_image(editor)
    post = posts.save_post(
        post=Post(title="New", slug="new", body=f"Hello\n\n{image.markdown()}\n"), user=editor
    )
    assert list(ImageUse.objects.filter(image=image).values_list("post_id", flat=True)) == [
        post.pk
    ], "the library lists it as used, and does not offer to delete it"
    assert status_for(Client(), image.url) == 404, "a draft: embargoed"


def test_a_post_saved_once_and_put_live_by_a_release_shows_its_image(editor):
    image = make_image(editor)
    post = posts.save_post(
        post=Post(title="New", slug="new", body=f"Hello\n\n{image.markdown()}\n"), user=editor
    )
    release = releases.create_release(name="Launch", user=editor)
    releases.add_item(release=release, post=post, user=editor)
    assert status_for(Client(), image.url) == 404, "in a release that has not gone out"
    releases.release_now(release=release, user=editor)
    assert Post.objects.get(pk=post.pk).status == Post.Status.PUBLISHED
    assert status_for(Client(), image.url) == 200, "the release put the post live"
