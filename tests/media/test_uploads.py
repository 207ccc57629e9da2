"""Uploads: what is stored (every width, as its format and WebP, with no camera or GPS data)
and what is refused with the editor's sentence, leaving nothing behind."""

import io
import struct
import zlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from PIL import Image as PILImage

from media import rules, services
from media.models import Image
from tests.media.conftest import GPS_TAG, MAKE_TAG, image_bytes, make_image, stored_files

pytestmark = pytest.mark.django_db


def test_an_upload_is_stored_in_every_width_without_its_camera_and_gps_data(editor, media_root):
    original = PILImage.open(io.BytesIO(image_bytes(size=(2000, 1000), exif=True)))
    assert original.getexif()[MAKE_TAG] == "InstaticCam", "the fixture carries EXIF"
    image = make_image(editor, content=image_bytes(size=(2000, 1000), exif=True))
    assert (image.width, image.height, image.widths) == (2000, 1000, [480, 960, 1600])
    assert image.name == "team-photo.jpg" and image.alt == "A red square"
    files = stored_files(media_root)
    assert len(files) == 8, files
    for path in files:
        stored = PILImage.open(media_root / path)
        assert not stored.getexif(), f"{path} kept EXIF"
        assert not stored.getexif().get_ifd(GPS_TAG)
        assert b"InstaticCam" not in (media_root / path).read_bytes()
    small = PILImage.open(media_root / rules.storage_path(image.key, image.name, width=480))
    assert small.size == (480, 240) and small.format == "JPEG"
    webp = PILImage.open(media_root / rules.storage_path(image.key, image.name, webp=True))
    assert webp.format == "WEBP"


def test_the_orientation_is_applied_to_the_pixels(editor):
    picture = PILImage.new("RGB", (300, 100), "blue")
    exif = PILImage.Exif()
    exif[0x0112] = 6  # rotated 90 degrees
    out = io.BytesIO()
    picture.save(out, "JPEG", exif=exif.tobytes())
    image = make_image(editor, content=out.getvalue())
    assert (image.width, image.height) == (100, 300)


def png_bomb(width: int, height: int) -> bytes:
    """Return a tiny PNG whose header promises ``width`` x ``height`` pixels."""
    out = io.BytesIO()
    PILImage.new("1", (width, height)).save(out, "PNG")
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("logo.svg", b"<svg onload='alert(1)'/>", "SVG files are not accepted"),
        ("photo.exe", image_bytes(), "images must be JPEG, PNG, GIF or WebP"),
        ("photo.png", image_bytes(), "is a JPEG image but its name ends in .png"),
        ("notes.jpg", b"just some text, not a picture", "is not a JPEG, PNG, GIF or WebP image"),
        ("cut.jpg", image_bytes()[:2000], "damaged or cut short"),
        ("bomb.png", png_bomb(12_000, 12_000), "the most accepted is 50 megapixels"),
        ("empty.jpg", b"", "The file is empty."),
    ],
)
def test_refusals_say_why_and_store_nothing(editor, media_root, name, content, words):
    with pytest.raises(rules.Refused) as refused:
        services.store_image(upload=SimpleUploadedFile(name, content), alt="x", user=editor)
    assert words in str(refused.value)
    assert not Image.objects.exists()
    assert stored_files(media_root) == [] if media_root.exists() else True


def test_the_bomb_is_refused_before_its_pixels_are_decoded(editor):
    # 100,000 x 100,000 one-bit pixels: 1.25 GB decoded, a few kilobytes as a file.
    content = png_bomb_header(100_000, 100_000)
    with pytest.raises(rules.Refused, match="the most accepted is 50 megapixels"):
        services.store_image(upload=SimpleUploadedFile("b.png", content), alt="x", user=editor)


def png_bomb_header(width: int, height: int) -> bytes:
    """Return a PNG header promising a huge image, with one compressed row of zeros."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    rows = zlib.compress(b"\0" * (width // 8 + 1))
    chunks = chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + chunks


def test_an_oversize_file_is_refused(editor, media_root):
    too_big = pytest.raises(rules.Refused, match="the largest accepted is 1 KB")
    with override_settings(INSTATIC_MEDIA_MAX_BYTES=1000), too_big:
        make_image(editor)
    assert not Image.objects.exists()


def test_missing_alt_text_is_refused(editor):
    with pytest.raises(rules.Refused, match="Describe the image"):
        make_image(editor, alt="  ")


def test_a_storage_failure_half_way_leaves_no_file_and_no_row(editor, media_root, monkeypatch):
    storage = services.image_storage()
    real_save = storage.save
    calls = []

    def failing_save(name, content, **kwargs):
        calls.append(name)
        if len(calls) == 3:
            raise OSError("disk full")
        return real_save(name, content, **kwargs)

    monkeypatch.setattr(storage, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        make_image(editor)
    assert len(calls) == 3
    assert stored_files(media_root) == []
    assert not Image.objects.exists()


def test_a_failed_insert_deletes_the_files(editor, media_root, monkeypatch):
    def failing_create(**kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(Image.objects, "create", failing_create)
    with pytest.raises(RuntimeError):
        make_image(editor)
    assert stored_files(media_root) == []


def test_deleting_an_image_deletes_its_files(editor, media_root):
    image = make_image(editor)
    services.delete_image(image)
    assert stored_files(media_root) == []


def test_an_image_wider_than_the_widest_kept_is_scaled_down_to_it(editor, media_root):
    with override_settings(INSTATIC_MEDIA_MAX_WIDTH=1000):
        image = make_image(editor, content=image_bytes(size=(3000, 1500)))
    assert (image.width, image.height, image.widths) == (1000, 500, [480, 960])
    full = PILImage.open(media_root / rules.storage_path(image.key, image.name))
    assert full.size == (1000, 500)
