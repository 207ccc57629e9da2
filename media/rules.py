"""What the media app decides, as pure functions: which uploads are refused and why, where
each size of an image is stored and served, which images a text uses, and who may see one.

Nothing here reads the database, the storage or the clock, so each rule is tested with a
table (tests/media/test_rules.py).
"""

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.utils.text import slugify

#: Pillow's format name -> the extensions a file of that format may have (the first is ours).
FORMATS = {
    "JPEG": ("jpg", "jpeg"),
    "PNG": ("png",),
    "GIF": ("gif",),
    "WEBP": ("webp",),
}
CONTENT_TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}
#: An image's key: random, unguessable, and the folder of all its files.
KEY_LENGTH = 20
KEY = re.compile(rf"^[0-9a-f]{{{KEY_LENGTH}}}$")
#: The public address of an image in a text: /media/<key>/ then a size or the file name.
MEDIA_PREFIX = "/media/"
_KEY_IN_TEXT = re.compile(rf"{re.escape(MEDIA_PREFIX)}([0-9a-f]{{{KEY_LENGTH}}})/")
ALT_MAX = 500


class Refused(ValueError):
    """An upload that is not stored, with the sentence that tells the editor why."""


def extension_of(name: str) -> str:
    """Return the lower-case extension of a file name, without the dot ('' when none)."""
    return PurePosixPath(name or "").suffix.lower().lstrip(".")


def name_refusal(name: str) -> str | None:
    """Return why a file of this name is refused before it is read, or None."""
    extension = extension_of(name)
    if extension == "svg" or extension == "svgz":
        return (
            "SVG files are not accepted: they can carry scripts. Export the picture as PNG "
            "and upload that."
        )
    allowed = sorted({ext for exts in FORMATS.values() for ext in exts})
    if extension not in allowed:
        shown = f".{extension}" if extension else "no extension"
        return (
            f"“{name}” has {shown}; images must be JPEG, PNG, GIF or WebP "
            f"({', '.join('.' + ext for ext in allowed)})."
        )
    return None


def size_refusal(size: int, *, max_bytes: int) -> str | None:
    """Return why a file of ``size`` bytes is refused, or None."""
    if size <= 0:
        return "The file is empty."
    if size > max_bytes:
        return (
            f"The file is {megabytes(size)}; the largest accepted is {megabytes(max_bytes)}. "
            "Make it smaller (fewer pixels or more compression) and upload it again."
        )
    return None


def image_refusal(
    *, name: str, format: str | None, width: int, height: int, frames: int, max_pixels: int
) -> str | None:
    """Return why an image with this header is refused, or None (nothing decoded yet)."""
    if format not in FORMATS:
        return f"“{name}” is not a JPEG, PNG, GIF or WebP image (or it is damaged)."
    if extension_of(name) not in FORMATS[format]:
        return (
            f"“{name}” is a {format} image but its name ends in .{extension_of(name)}; "
            f"rename it to .{FORMATS[format][0]} and upload it again."
        )
    if width <= 0 or height <= 0:
        return f"“{name}” has no pixels."
    if width * height > max_pixels:
        return too_many_pixels(name, max_pixels=max_pixels, size=(width, height))
    if frames > 1:
        return f"“{name}” is animated; animated images are not accepted. Upload a still image."
    return None


def too_many_pixels(name: str, *, max_pixels: int, size: tuple[int, int] | None = None) -> str:
    """Return the refusal of an image with more than ``max_pixels`` pixels."""
    shown = f"is {size[0]:,} × {size[1]:,} pixels" if size else "has too many pixels"
    return (
        f"“{name}” {shown}; the most accepted is {max_pixels / 1_000_000:g} megapixels. "
        "Make it smaller and upload it again."
    )


def alt_refusal(alt: str) -> str | None:
    """Return why this alt text cannot describe an image, or None."""
    if not alt.strip():
        return (
            "Describe the image in a few words (its alt text): people who cannot see it, "
            "and search engines, read this instead."
        )
    if len(alt) > ALT_MAX:
        return f"Keep the alt text under {ALT_MAX} characters (it has {len(alt)})."
    return None


def megabytes(size: int) -> str:
    """Return a size in bytes as people read it: '1.5 MB', '300 KB'."""
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB".replace(".0 MB", " MB")
    return f"{max(1, round(size / 1024))} KB"


def file_name(original: str, format: str) -> str:
    """Return the name an image is served under: its original name made address-safe."""
    stem = slugify(PurePosixPath(original).stem)[:80].strip("-") or "image"
    return f"{stem}.{FORMATS[format][0]}"


def widths_for(width: int, wanted: tuple[int, ...] | list[int]) -> list[int]:
    """Return the smaller widths made of an image ``width`` pixels wide, narrowest first."""
    return sorted({w for w in wanted if 0 < w < width})


def scaled_height(width: int, height: int, to_width: int) -> int:
    """Return the height of an image scaled from ``width`` to ``to_width``, at least 1."""
    return max(1, round(height * to_width / width))


def storage_path(key: str, name: str, *, width: int | None = None, webp: bool = False) -> str:
    """Return where one file of an image is stored (relative to the storage's root)."""
    folder = f"images/{key}/" + (f"{width}/" if width else "")
    return folder + (f"{PurePosixPath(name).stem}.webp" if webp else name)


def public_path(key: str, name: str, *, width: int | None = None) -> str:
    """Return the address an image (or one of its widths) is served at."""
    return f"{MEDIA_PREFIX}{key}/" + (f"{width}/" if width else "") + name


def keys_in(*texts: str) -> set[str]:
    """Return the keys of the site's images that ``texts`` point at."""
    found: set[str] = set()
    for text in texts:
        if text and MEDIA_PREFIX in text:
            found.update(_KEY_IN_TEXT.findall(text))
    return found


def wants_webp(accept: str) -> bool:
    """Return True if an ``Accept`` header says the browser takes WebP."""
    return "image/webp" in (accept or "").lower()


@dataclass(frozen=True)
class Access:
    """Whether an image is served to a request, and how long it may be kept."""

    allowed: bool
    cache_control: str = ""


PRIVATE = "private, no-store, max-age=0"


def decide_access(*, public: bool, editor: bool, preview: bool, max_age: int) -> Access:
    """Decide whether a request gets an image.

    A public image (a live post uses it) is anyone's and may be cached briefly; an embargoed
    one only an editor's or a valid preview link's, and never by a shared cache. Everyone
    else gets the 404 a made-up address gets, so nothing says that the image exists.
    """
    if public:
        return Access(True, f"public, max-age={max_age}")
    if editor or preview:
        return Access(True, PRIVATE)
    return Access(False)
