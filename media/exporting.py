"""The images the static export copies: those the public may see now, each width in the
upload's format (a static host cannot choose WebP by the browser's Accept header)."""

from collections.abc import Iterator

from django.db.models import F, Q, Value
from django.db.models.functions import Concat

from media import rules, services
from media.models import FeaturedImage, Image, ImageUse
from publishing import selectors


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
    """Yield (the file's path in the export, its bytes) for every file of the public images."""
    storage = services.image_storage()
    for image in public_images().iterator(chunk_size=200):
        for width in [None, *image.widths]:
            with storage.open(rules.storage_path(image.key, image.name, width=width)) as stream:
                content = stream.read()
            yield rules.public_path(image.key, image.name, width=width).lstrip("/"), content
