"""Images on a new post's page, through the test client: the Images section before the first
save, the featured image chosen there kept when the page creates the post, and an image
uploaded for a post that was never saved: private, and listed in the library as not used."""

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from media.models import FeaturedImage, ImageUse
from publishing import posts
from publishing.models import Post
from tests.media.conftest import make_image
from tests.publishing.conftest import form_data

pytestmark = pytest.mark.django_db

ADD_URL = reverse("admin:publishing_post_add")
LIBRARY = reverse("admin:media_image_changelist")
FEATURED = "media_featured_key"


def new_post(client, **changes):
    """Load the new post's page, fill it as an editor would and save it."""
    page = client.get(ADD_URL)
    assert page.status_code == 200
    data = form_data(page)
    data.update({"title": "Opening day", "slug": "opening-day", "body": "Doors open.", **changes})
    return client.post(ADD_URL, data)


def test_a_new_posts_page_offers_images_to_editors_who_may_upload(as_editor, client):
    page = as_editor.get(ADD_URL).content.decode()
    assert 'id="images-panel"' in page
    assert "A new image uploaded here is seen only by editors until a post showing it" in page
    assert f'name="{FEATURED}"' in page
    assert "The featured image is kept when you save the post." in page


def test_a_new_posts_page_shows_no_images_to_who_may_not_upload(db):
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename__in=["view_post", "add_post"]))
    client = Client()
    client.force_login(viewer)
    page = client.get(ADD_URL)
    assert page.status_code == 200
    assert 'id="images-panel"' not in page.content.decode()


def test_the_first_save_keeps_the_featured_image_and_the_images_used(as_editor, editor):
    inserted = make_image(editor, alt="The doors")
    featured = make_image(editor, alt="The crowd")
    answer = new_post(
        as_editor, body=f"Doors open.\n\n{inserted.markdown()}\n", **{FEATURED: featured.key}
    )
    assert answer.status_code == 302
    post = Post.objects.get(slug="opening-day")
    assert FeaturedImage.objects.get(post=post).image == featured
    assert list(ImageUse.objects.values_list("image_id", "post_id")) == [(inserted.pk, post.pk)]
    change = as_editor.get(reverse("admin:publishing_post_change", args=[post.pk])).content
    assert f'src="{featured.thumbnail_url}" alt="The crowd"' in change.decode()
    assert Client().get(inserted.url).status_code == 404, "a draft: both embargoed"
    assert Client().get(featured.url).status_code == 404
    posts.publish_now(post=post, user=editor)
    assert Client().get(inserted.url).status_code == 200
    assert Client().get(featured.url).status_code == 200


def test_a_new_post_saved_with_a_field_to_correct_keeps_the_featured_image_chosen(
    as_editor, editor
):
    featured = make_image(editor, alt="The crowd")
    answer = new_post(as_editor, slug="", **{FEATURED: featured.key})
    assert answer.status_code == 200, "the form comes back to be corrected"
    page = answer.content.decode()
    assert f'name="{FEATURED}" id="images-featured-key" value="{featured.key}"' in page
    assert f'src="{featured.thumbnail_url}" alt="The crowd"' in page
    assert not Post.objects.exists()


def test_an_image_of_a_post_never_saved_is_private_and_listed_as_not_used(as_editor, editor):
    left = make_image(editor, alt="Left behind")
    used = make_image(editor, alt="In a post")
    featured = make_image(editor, alt="Featured only")
    post = posts.save_post(post=Post(title="Kept", slug="kept", body=used.markdown()), user=editor)
    FeaturedImage.objects.create(post=post, image=featured)
    posts.publish_now(post=post, user=editor)
    assert Client().get(left.url).status_code == 404, "nobody's but the editors'"

    listed = as_editor.get(LIBRARY, {"used": "no"}).content.decode()
    assert "Left behind" in listed
    assert "In a post" not in listed and "Featured only" not in listed
    in_posts = as_editor.get(LIBRARY, {"used": "yes"}).content.decode()
    assert "In a post" in in_posts and "Featured only" in in_posts
    assert "Left behind" not in in_posts
    everything = as_editor.get(LIBRARY).content.decode()
    assert everything.count("not used") == 1, "a featured image is used too"
