"""The editors' addresses: who may upload, preview and choose featured images, and what they
answer; the live preview's bounds; the storage check."""

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings

from media.checks import check_storage
from media.models import FeaturedImage, Image
from publishing import posts
from publishing.models import Post
from tests.media.conftest import make_image, upload_of

pytestmark = pytest.mark.django_db

UPLOAD = "/admin/media/image/upload/"
PICKER = "/admin/media/image/picker/"
PREVIEW = "/admin/live-preview/"


@pytest.fixture
def viewer(db) -> User:
    """Staff who may only look at posts."""
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_post"))
    return User.objects.get(pk=user.pk)


def test_an_editor_uploads_and_gets_the_markdown_to_insert(as_editor):
    answer = as_editor.post(UPLOAD, {"file": upload_of("Sea View.jpg"), "alt": "The sea"})
    assert answer.status_code == 201
    image = Image.objects.get()
    assert answer.json()["image"]["markdown"] == f"![The sea](/media/{image.key}/sea-view.jpg)"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"alt": "x"}, "Choose an image file to upload."),
        ({"file": "upload", "alt": ""}, "Describe the image in a few words"),
        ({"file": "svg", "alt": "x"}, "SVG files are not accepted"),
    ],
)
def test_a_refused_upload_says_why(as_editor, data, words):
    if data.get("file") == "upload":
        data["file"] = upload_of()
    elif data.get("file") == "svg":
        data["file"] = upload_of("a.svg", b"<svg/>")
    answer = as_editor.post(UPLOAD, data)
    assert answer.status_code == 400
    assert words in answer.json()["error"]
    assert not Image.objects.exists()


def test_an_announced_oversize_body_is_refused_before_it_is_read(as_editor):
    with override_settings(INSTATIC_MEDIA_MAX_BYTES=1000):
        answer = as_editor.post(UPLOAD, {"file": upload_of(), "alt": "x"})
    assert answer.status_code == 400
    assert "the largest accepted is 1 KB" in answer.json()["error"]


def test_only_editors_who_may_change_posts_upload_or_choose(viewer, editor):
    post = posts.save_post(post=Post(title="T", slug="t", body="Text."), user=editor)
    image = make_image(editor)
    anonymous = Client()
    answer = anonymous.post(UPLOAD, {"file": upload_of(), "alt": "x"})
    assert answer.status_code == 302 and "/admin/login/" in answer["Location"]
    looker = Client()
    looker.force_login(viewer)
    assert looker.post(UPLOAD, {"file": upload_of(), "alt": "x"}).status_code == 403
    assert looker.get(PICKER).status_code == 403
    featured = f"/admin/media/image/featured/{post.pk}/"
    assert looker.post(featured, {"key": image.key}).status_code == 403
    assert not FeaturedImage.objects.exists()
    assert Image.objects.count() == 1
    # Viewers see the images (the library, embargoed files), as they see the posts.
    assert looker.get(image.url).status_code == 200
    assert looker.get("/admin/media/image/").status_code == 200


def test_the_picker_searches_the_words(as_editor, editor):
    make_image(editor, alt="A lighthouse at night")
    make_image(editor, alt="Breakfast")
    found = as_editor.get(PICKER, {"q": "LIGHTHOUSE"}).json()["images"]
    assert [i["alt"] for i in found] == ["A lighthouse at night"]
    assert len(as_editor.get(PICKER).json()["images"]) == 2


def test_the_live_preview_renders_as_the_public_page_does(as_editor):
    answer = as_editor.post(PREVIEW, {"body": "**bold** <script>alert(1)</script>"})
    html = answer.json()["html"]
    assert "<strong>bold</strong>" in html and "<script" not in html


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("x" * 200_001, "characters long; the limit is 200,000"),
        ("<div>" * 200, "cannot be published: the body nests elements more than 100 deep"),
    ],
)
def test_the_live_preview_refuses_what_a_save_refuses(as_editor, body, words):
    assert words in as_editor.post(PREVIEW, {"body": body}).json()["error"]


def test_the_live_preview_is_for_editors_only(viewer):
    assert Client().post(PREVIEW, {"body": "x"}).status_code == 302
    looker = Client()
    looker.force_login(viewer)
    assert looker.post(PREVIEW, {"body": "x"}).status_code == 403


def test_the_storage_check_refuses_a_folder_that_cannot_be_made(tmp_path):
    # A file where a folder should be: nobody, root included, can make the folder there.
    (tmp_path / "var").write_text("not a folder")
    with override_settings(MEDIA_ROOT=str(tmp_path / "var" / "media")):
        errors = check_storage()
    assert [e.id for e in errors] == ["media.E002"]
    assert "cannot be written to" in errors[0].msg


def test_the_storage_check_passes_a_writable_folder(tmp_path):
    with override_settings(MEDIA_ROOT=str(tmp_path / "new" / "media")):
        assert check_storage() == []


def test_the_storage_check_refuses_a_storage_that_cannot_be_made():
    broken = {
        "default": {"BACKEND": "storages.backends.nowhere.Storage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    with override_settings(STORAGES=broken):
        errors = check_storage()
    assert [e.id for e in errors] == ["media.E001"]
    assert "django-storages[s3]" in errors[0].hint
