"""Fixtures for the media tests: images made in memory (with camera and GPS data where a test
needs them), uploads, and a storage folder of the test's own."""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from PIL import Image as PILImage

from media import services
from tests.publishing.conftest import as_editor, drafter, editor  # noqa: F401

GPS_TAG = 0x8825
MAKE_TAG = 0x010F


def image_bytes(
    format: str = "JPEG", size=(1200, 800), *, exif: bool = False, color=(200, 30, 30)
) -> bytes:
    """Return an image file's bytes; with ``exif``, a camera make and a GPS position."""
    image = PILImage.new("RGB", size, color)
    out = io.BytesIO()
    options = {}
    if exif:
        data = PILImage.Exif()
        data[MAKE_TAG] = "InstaticCam"
        data.get_ifd(GPS_TAG).update({1: "N", 2: (48.0, 51.0, 24.0), 3: "E", 4: (2.0, 21.0, 3.0)})
        options["exif"] = data.tobytes()
    image.save(out, format=format, **options)
    return out.getvalue()


def upload_of(name: str = "team photo.jpg", content: bytes | None = None) -> SimpleUploadedFile:
    """Return an uploaded file as a view receives it."""
    return SimpleUploadedFile(name, image_bytes() if content is None else content)


@pytest.fixture(autouse=True)
def media_root(tmp_path):
    """Store every test's images in a folder of its own."""
    root = tmp_path / "media"
    with override_settings(MEDIA_ROOT=str(root)):
        from django.core.files.storage import storages

        storages._storages.pop("default", None)
        yield root
        storages._storages.pop("default", None)


def stored_files(root) -> list[str]:
    """Return every file under ``root``, relative, sorted."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def make_image(user=None, *, alt: str = "A red square", **kwargs):
    """Store an image through the upload service and return it."""
    return services.store_image(upload=upload_of(**kwargs), alt=alt, user=user)
