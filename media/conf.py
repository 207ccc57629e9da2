"""The media app's settings, read lazily from Django settings with ``INSTATIC_MEDIA_`` names.

Like :mod:`publishing.conf`: defaults and meanings live here, and tests override any of them
with ``override_settings(INSTATIC_MEDIA_MAX_BYTES=...)``.
"""

from coordination.conf import AppSettings

_DEFAULTS = {
    # The largest upload accepted, in bytes: a phone's 20-megapixel JPEG is 5 to 12 MB.
    "MEDIA_MAX_BYTES": 20 * 1024 * 1024,
    # The most pixels an image may have: read from its header before any pixel is decoded,
    # so a small file that would decode to gigabytes (a decompression bomb) is refused.
    "MEDIA_MAX_PIXELS": 50_000_000,
    # The widest an image is kept: a wider upload is scaled down to it (a page never shows
    # more; WordPress keeps 2,560 px too), so a camera's 20 megapixels cost 6.
    "MEDIA_MAX_WIDTH": 2560,
    # The widths made of each image (those narrower than the image), for responsive srcset.
    "MEDIA_WIDTHS": (480, 960, 1600),
    # Seconds a public image may be kept by browsers and caches. It stops being public when
    # no live post uses it any more; a cache may keep it this much longer.
    "MEDIA_PUBLIC_MAX_AGE": 60,
}


settings = AppSettings(_DEFAULTS)
