"""Images as a page shows them: each of the site's images in a body gets its sizes (srcset),
its dimensions and lazy loading, and the post's featured image goes above the body.

Registered with ``publishing.page_bodies``. The body's HTML was sanitized by nh3, whose
output is regular: an image is ``<img src="..." ...>`` with escaped attribute values, so a
pattern finds ours. One query reads every image of the page and one the featured image,
however many images the body has. On a preview link, every image address carries a token
that lets the link's reader see the (still embargoed) image until the link expires.
"""

import re
from urllib.parse import quote

from django.utils.html import format_html
from django.utils.safestring import mark_safe

from media import access, rules
from media.models import FeaturedImage, Image

_IMG = re.compile(
    r'<img src="(?P<prefix>'
    + re.escape(rules.MEDIA_PREFIX)
    + r")(?P<key>[0-9a-f]{"
    + str(rules.KEY_LENGTH)
    + r'})/(?P<rest>[^"]*)"(?P<attrs>[^>]*)>'
)
#: What the browser assumes of the image's width on the page when choosing a size.
SIZES = "(max-width: 800px) 100vw, 800px"


def _with_token(url: str, token: str | None) -> str:
    return f"{url}?preview={quote(token)}" if token else url


def image_tag(image: Image, *, alt: str, token: str | None, css_class: str = "") -> str:
    """Return the ``<img>`` of one of the site's images with every size it has."""
    srcset = ", ".join(
        f"{_with_token(rules.public_path(image.key, image.name, width=w), token)} {w}w"
        for w in image.widths
    )
    full = _with_token(image.url, token)
    srcset = f"{srcset}, {full} {image.width}w" if srcset else f"{full} {image.width}w"
    return format_html(
        '<img src="{}" srcset="{}" sizes="{}" width="{}" height="{}" alt="{}" loading="lazy" '
        'decoding="async" style="max-width:100%;height:auto"{}>',
        full,
        srcset,
        SIZES,
        image.width,
        image.height,
        alt,
        format_html(' class="{}"', css_class) if css_class else "",
    )


def _alt_of(attrs: str) -> str | None:
    match = re.search(r'alt="([^"]*)"', attrs)
    return match.group(1) if match else None


def add_images(post_id: int, html: str, *, preview_until=None) -> str:
    """Return ``html`` with the site's images given their sizes and the featured image on top."""
    found = list(_IMG.finditer(html))
    keys = {m.group("key") for m in found}
    images = {i.key: i for i in Image.objects.filter(key__in=keys)} if keys else {}
    featured = (
        FeaturedImage.objects.select_related("image").filter(post_id=post_id).first()
        if post_id
        else None
    )

    def token(key: str) -> str | None:
        if preview_until is None:
            return None
        return access.preview_token(key, expires_at=preview_until)

    def replace(match: re.Match) -> str:
        image = images.get(match.group("key"))
        if image is None or not match.group("rest").startswith(image.name):
            return match.group(0)
        # The sanitizer escaped the alt text already: it goes back as it was.
        alt = mark_safe(_alt_of(match.group("attrs")) or "")
        return image_tag(image, alt=alt, token=token(image.key))

    shown = _IMG.sub(replace, html) if images else html
    if featured is not None:
        top = image_tag(
            featured.image,
            alt=featured.image.alt,
            token=token(featured.image.key),
            css_class="featured-image",
        )
        shown = f'<figure class="featured">{top}</figure>{shown}'
    return shown
