"""What changes images: storing an upload, choosing a post's featured image, deleting one.

An upload is checked and processed before anything is written; its files are then saved and
its row inserted, and if anything fails on the way every file already saved is deleted again,
so storage never keeps half an image and the library never lists one without its files.
"""

import logging
import secrets

from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import transaction

from media import processing, rules
from media.conf import settings
from media.models import FeaturedImage, Image

logger = logging.getLogger(__name__)


def image_storage():
    """Return the storage images are kept in (Django's ``default``, from ``STORAGES``)."""
    return storages["default"]


def store_image(*, upload, alt: str, user) -> Image:
    """Check, process and store an uploaded file; return its :class:`Image`.

    Raise :class:`rules.Refused` with the editor's sentence when the file or the alt text is
    refused; nothing is stored then.
    """
    name = getattr(upload, "name", "") or ""
    for problem in (
        rules.alt_refusal(alt),
        rules.name_refusal(name),
        rules.size_refusal(upload.size or 0, max_bytes=int(settings.MEDIA_MAX_BYTES)),
    ):
        if problem:
            raise rules.Refused(problem)
    upload.seek(0)
    processed = processing.process(
        upload,
        name,
        max_pixels=int(settings.MEDIA_MAX_PIXELS),
        widths=tuple(settings.MEDIA_WIDTHS),
        max_width=int(settings.MEDIA_MAX_WIDTH),
    )
    key = secrets.token_hex(rules.KEY_LENGTH // 2)
    served_as = rules.file_name(name, processed.format)
    storage = image_storage()
    saved: list[str] = []
    try:
        for rendition in processed.renditions:
            path = rules.storage_path(key, served_as, width=rendition.width, webp=rendition.webp)
            stored = storage.save(path, ContentFile(rendition.content))
            saved.append(stored)
            if stored != path:  # the key is new: another file there means a broken storage
                raise OSError(f"the storage kept {path} as {stored}")
        with transaction.atomic():
            image = Image.objects.create(
                key=key,
                name=served_as,
                original_name=name[:255],
                alt=alt.strip(),
                format=processed.format,
                width=processed.width,
                height=processed.height,
                widths=processed.widths,
                size=sum(len(r.content) for r in processed.renditions if not r.webp),
                uploaded_by=user if getattr(user, "pk", None) else None,
            )
    except BaseException:
        _delete_files(storage, saved)
        raise
    logger.info("stored image %s (%r, %dx%d)", key, name, processed.width, processed.height)
    return image


def _delete_files(storage, paths: list[str]) -> None:
    """Delete ``paths`` from ``storage``, logging (not raising) what could not be deleted."""
    for path in paths:
        try:
            storage.delete(path)
        except Exception:
            logger.exception("could not delete %s after a failed upload", path)


def set_featured(*, post, image: Image | None) -> None:
    """Make ``image`` the featured image of ``post`` (None: it has none)."""
    with transaction.atomic():
        if image is None:
            FeaturedImage.objects.filter(post=post).delete()
        else:
            FeaturedImage.objects.update_or_create(post=post, defaults={"image": image})


def delete_image(image: Image) -> None:
    """Delete an image's row, then its files (a file left behind is only logged)."""
    paths = image.files()
    image.delete()
    storage = image_storage()
    for path in paths:
        try:
            if storage.exists(path):
                storage.delete(path)
        except Exception:
            logger.exception("could not delete %s of image %s", path, image.key)
