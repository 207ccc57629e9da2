"""Pillow's half of an upload: read the header, refuse what is not a real image, and make the
files a page needs (each width, as the upload's format and as WebP), with no metadata.

Every file is encoded anew from the decoded pixels: EXIF (camera, GPS position, time), XMP,
comments and text chunks of the upload are not carried over; only the colour profile is (the
colours would change without it), and the EXIF orientation is applied to the pixels first.
"""

import io
import logging
import warnings
from dataclasses import dataclass, field

from PIL import Image as PILImage
from PIL import ImageOps, UnidentifiedImageError

from media import rules

logger = logging.getLogger(__name__)

JPEG_QUALITY = 85
WEBP_QUALITY = 80


@dataclass(frozen=True)
class Rendition:
    """One file of an image: its width (None: the full size), whether WebP, its bytes."""

    width: int | None
    webp: bool
    content: bytes


@dataclass
class Processed:
    """What an upload became: its format, size and every file to store."""

    format: str
    width: int
    height: int
    widths: list[int]
    renditions: list[Rendition] = field(default_factory=list)


def _open(stream, name: str, *, max_pixels: int) -> PILImage.Image:
    """Open ``stream`` reading only its header; raise :class:`rules.Refused` if it is no
    image we take. Pillow's own bomb guard is made an error, not a warning."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PILImage.DecompressionBombWarning)
            image = PILImage.open(stream, formats=list(rules.FORMATS))
    except (PILImage.DecompressionBombError, PILImage.DecompressionBombWarning):
        raise rules.Refused(rules.too_many_pixels(name, max_pixels=max_pixels))
    except (UnidentifiedImageError, OSError, SyntaxError):
        raise rules.Refused(
            rules.image_refusal(
                name=name, format=None, width=0, height=0, frames=1, max_pixels=max_pixels
            )
        )
    width, height = image.size
    problem = rules.image_refusal(
        name=name,
        format=image.format,
        width=width,
        height=height,
        frames=getattr(image, "n_frames", 1),
        max_pixels=max_pixels,
    )
    if problem:
        raise rules.Refused(problem)
    return image


#: EXIF orientations that turn the picture a quarter: its stored width becomes its height.
QUARTER_TURNS = frozenset([5, 6, 7, 8])


def process(
    stream, name: str, *, max_pixels: int, widths: tuple[int, ...], max_width: int
) -> Processed:
    """Return the files to store for the upload in ``stream``, or raise :class:`rules.Refused`.

    An image wider than ``max_width`` (once turned upright) is kept at that width: a JPEG is
    then decoded at a fraction of its size straight away (libjpeg's scaled decoding), which
    makes a 20-megapixel photo several times cheaper to process.
    """
    image = _open(stream, name, max_pixels=max_pixels)
    source_format = image.format
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PILImage.DecompressionBombWarning)
            turned = image.getexif().get(0x0112) in QUARTER_TURNS
            upright_width, upright_height = image.size[::-1] if turned else image.size
            if source_format == "JPEG" and upright_width > max_width:
                box = (max_width, rules.scaled_height(upright_width, upright_height, max_width))
                image.draft("RGB", box[::-1] if turned else box)
            image.load()
            icc = image.info.get("icc_profile")
            image = ImageOps.exif_transpose(image)
    except (OSError, SyntaxError, ValueError, PILImage.DecompressionBombWarning) as exc:
        logger.info("refused upload %r: %s", name, exc)
        raise rules.Refused(f"“{name}” is damaged or cut short; it could not be read.")
    image = _normal_mode(image, source_format)
    if image.width > max_width:
        size = (max_width, rules.scaled_height(image.width, image.height, max_width))
        image = image.resize(size, PILImage.Resampling.LANCZOS, reducing_gap=3.0)
    width, height = image.size
    smaller = rules.widths_for(width, widths)
    result = Processed(format=source_format, width=width, height=height, widths=smaller)
    for to_width in [None, *smaller]:
        sized = image
        if to_width is not None:
            size = (to_width, rules.scaled_height(width, height, to_width))
            sized = image.resize(size, PILImage.Resampling.LANCZOS, reducing_gap=3.0)
        result.renditions.append(Rendition(to_width, False, _encode(sized, source_format, icc)))
        result.renditions.append(Rendition(to_width, True, _encode(sized, "WEBP", icc)))
    return result


def _normal_mode(image: PILImage.Image, format: str) -> PILImage.Image:
    """Return ``image`` in a mode its format (and WebP) can write without surprises."""
    if format == "JPEG":
        return image if image.mode in ("RGB", "L") else image.convert("RGB")
    if image.mode in ("RGB", "RGBA", "L", "LA"):
        return image
    if format == "GIF" and image.mode == "P":
        return image.convert("RGBA")
    return image.convert("RGBA" if "transparency" in image.info or "A" in image.mode else "RGB")


def _encode(image: PILImage.Image, format: str, icc: bytes | None) -> bytes:
    """Encode ``image`` as ``format`` with nothing but its pixels and colour profile."""
    out = io.BytesIO()
    options: dict = {}
    if icc:
        options["icc_profile"] = icc
    if format == "JPEG":
        options.update(quality=JPEG_QUALITY, optimize=True, progressive=True)
        image = image if image.mode in ("RGB", "L") else image.convert("RGB")
    elif format == "WEBP":
        options.update(quality=WEBP_QUALITY, method=4)
        if image.mode not in ("RGB", "RGBA"):
            image = image.convert("RGBA" if "A" in image.mode else "RGB")
    elif format == "PNG":
        options.update(optimize=False)
    elif format == "GIF":
        image = (
            image.convert("P", palette=PILImage.Palette.ADAPTIVE) if image.mode != "P" else image
        )
    image.save(out, format=format, **options)
    return out.getvalue()
