"""The images the static export copies: those the public may see now, each width in the
upload's format (a static host cannot choose WebP by the browser's Accept header)."""

import logging
from collections.abc import Iterator

from django.db.models import F, Q, Value
from django.db.models.functions import Concat

from media import rules, services
from media.models import FeaturedImage, Image, ImageUse
from publishing import selectors

logger = logging.getLogger(__name__)


def public_images():
    """Return the images a live post shows now (the embargo's rule, for every image at once)."""
    live = selectors.live_posts().values("pk")
    marker = Concat(Value(rules.MEDIA_PREFIX), F("image__key"), Value("/"))
    in_text = ImageUse.objects.filter(post__in=live, post__body_html__contains=marker)
    featured = FeaturedImage.objects.filter(post__in=live)
    return Image.objects.filter(
        Q(pk__in=in_text.values("image_id")) | Q(pk__in=featured.values("image_id"))
    ).order_by("key")


def public_files() -> Iterator[tuple[str, bytes]]:
    """Yield (the file's path in the export, its bytes) for every file of the public images.

    A file the storage does not have (a replica that does not share the storage, a file
    deleted by hand) is logged and left out: the pages are still exported.
    """
    storage = services.image_storage()
    for image in public_images().iterator(chunk_size=200):
        for width in [None, *image.widths]:
            path = rules.storage_path(image.key, image.name, width=width)
            try:
                with storage.open(path) as stream:
                    content = stream.read()
            except FileNotFoundError:
                logger.error(
                    "static export: image %s has no file %s in this storage; is it shared "
                    "by every replica (docs/media.md)?",
                    image.key,
                    path,
                )
                continue
            yield rules.public_path(image.key, image.name, width=width).lstrip("/"), content
