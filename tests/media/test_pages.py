"""Images as pages show them: sizes and dimensions on the public page in a bounded number of
queries, the body's alt text required in the post form, and the static export's copies."""

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from plugins.builtin.static_export import CURRENT, export_site
from publishing import posts
from publishing.forms import check_body
from publishing.models import Post
from tests.media.conftest import image_bytes, make_image

pytestmark = pytest.mark.django_db


def live_post_with(images, editor, *, slug="gallery") -> Post:
    body = "\n\n".join(image.markdown() for image in images)
    post = posts.save_post(post=Post(title="Gallery", slug=slug, body=body), user=editor)
    return posts.publish_now(post=post, user=editor)


def test_the_public_page_shows_every_size_of_each_image(editor):
    image = make_image(editor, content=image_bytes(size=(2000, 1000)))
    post = live_post_with([image], editor)
    page = Client().get(post.get_absolute_url()).content.decode()
    key, name = image.key, image.name
    assert (
        f'<img src="/media/{key}/{name}" srcset="/media/{key}/480/{name} 480w, '
        f"/media/{key}/960/{name} 960w, /media/{key}/1600/{name} 1600w, "
        f'/media/{key}/{name} 2000w" sizes="(max-width: 800px) 100vw, 800px" width="2000" '
        f'height="1000" alt="A red square" loading="lazy" decoding="async" '
        'style="max-width:100%;height:auto">'
    ) in page


def test_twenty_images_cost_two_queries_more_than_none(editor):
    plain = posts.publish_now(
        post=posts.save_post(post=Post(title="Plain", slug="plain", body="Text."), user=editor),
        user=editor,
    )
    images = [
        make_image(editor, alt=f"Image {n}", content=image_bytes(size=(600, 400)))
        for n in range(20)
    ]
    gallery = live_post_with(images, editor)
    counts = []
    for post in (plain, gallery):
        with CaptureQueriesContext(connection) as queries:
            assert Client().get(post.get_absolute_url()).status_code == 200
        counts.append(len(queries))
    assert counts[1] - counts[0] <= 2, counts
    page = Client().get(gallery.get_absolute_url()).content.decode()
    assert page.count("srcset=") == 20


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        ("![](/media/0123456789abcdef0123/a.jpg)", True),
        ("![  ](/media/0123456789abcdef0123/a.jpg)", True),
        ('<img src="/static/a.png">', True),
        ("![A map of the route](/media/0123456789abcdef0123/a.jpg)", False),
        ("No image at all.", False),
    ],
)
def test_an_image_without_alt_text_is_refused_with_how_to_write_it(body, refused):
    from django.core.exceptions import ValidationError

    if refused:
        with pytest.raises(ValidationError, match="has no alt text. Write what it shows"):
            check_body(body)
    else:
        assert check_body(body) == body


def test_the_static_export_copies_the_images_its_pages_show_and_no_other(editor, tmp_path):
    shown = make_image(editor, content=image_bytes(size=(1000, 500)))
    embargoed = make_image(editor, alt="Not yet")
    live_post_with([shown], editor)
    draft = posts.save_post(
        post=Post(title="Later", slug="later", body=embargoed.markdown()), user=editor
    )
    posts.save_post(post=draft, user=editor)
    export_site(tmp_path / "site")
    site = tmp_path / "site" / CURRENT
    assert (site / "media" / shown.key / shown.name).read_bytes()[:2] == b"\xff\xd8"
    assert (site / "media" / shown.key / "480" / shown.name).exists()
    assert (site / "media" / shown.key / "960" / shown.name).exists()
    assert not (site / "media" / embargoed.key).exists()
    page = (site / "posts" / "gallery" / "index.html").read_text()
    assert f'srcset="/media/{shown.key}/480/{shown.name} 480w' in page


def test_an_image_missing_from_the_storage_is_left_out_of_the_export(editor, tmp_path, media_root):
    image = make_image(editor, content=image_bytes(size=(600, 400)))
    live_post_with([image], editor)
    (media_root / "images" / image.key / image.name).unlink()
    export_site(tmp_path / "site")
    site = tmp_path / "site" / CURRENT
    assert not (site / "media" / image.key / image.name).exists()
    assert (site / "media" / image.key / "480" / image.name).exists()
    assert (site / "posts" / "gallery" / "index.html").exists()
