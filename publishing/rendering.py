"""Markdown to safe HTML: the one place post bodies are turned into markup.

A body is rendered once, when it is saved (:func:`render`, called by
``services.save_post``); the post keeps the HTML and the excerpt, and page views only read
them. Rendering is pyromark (pulldown-cmark, in Rust: linear in the length of the body, and
about a hundred times faster than a pure-Python parser on hostile input) followed by ``nh3``
against an allow-list of tags, attributes and URL schemes, so raw HTML, ``javascript:`` links
and event-handler attributes in a body are inert. ``nh3``'s HTML parser slows down with the
square of nesting depth, so HTML nested deeper than :data:`MAX_NESTING` elements is refused
before it is parsed (the admin form says so; a body written some other way is shown as text).

Images must come from the site itself unless ``INSTATIC_ALLOW_EXTERNAL_IMAGES`` is on: an
image on another host tells that host who read the post and when (a tracking pixel).
"""

import html
import logging
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import nh3
import pyromark
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from publishing.conf import settings

logger = logging.getLogger(__name__)

MARKDOWN_OPTIONS = pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_STRIKETHROUGH

# Elements open at once. Real posts stay under ten; browsers stop nesting at 512 anyway.
MAX_NESTING = 100
VOID_ELEMENTS = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)
# Enough sanitized HTML for an excerpt's words, however long the body.
EXCERPT_SOURCE_CHARS = 20_000
_TAG = re.compile(r"<(/?[A-Za-z][A-Za-z0-9]*)")

ALLOWED_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "del",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "img",
    "li",
    "ol",
    "p",
    "pre",
    "strong",
    "sub",
    "sup",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "code": {"class"},
    "img": {"src", "alt", "title"},
    "td": {"align"},
    "th": {"align"},
}
ALLOWED_URL_SCHEMES = {"http", "https", "mailto"}


class RenderError(ValueError):
    """A body that cannot be rendered (e.g. nested too deep)."""


def check_nesting(fragment: str, *, limit: int = MAX_NESTING) -> None:
    """Raise :class:`RenderError` if ``fragment`` opens more than ``limit`` elements at once.

    Counts like a browser would, closely enough: void elements never open, an end tag closes
    the innermost open element of its name and everything inside it, a stray end tag is
    ignored. Stops at the first element over the limit.
    """
    stack: list[str] = []
    for match in _TAG.finditer(fragment):
        tag = match[1]
        if tag[0] == "/":
            name = tag[1:].lower()
            if name in stack:
                del stack[len(stack) - 1 - stack[::-1].index(name) :]
            continue
        name = tag.lower()
        if name in VOID_ELEMENTS:
            continue
        stack.append(name)
        if len(stack) > limit:
            raise RenderError(f"the body nests elements more than {limit} deep")


def is_external(url: str) -> bool:
    """Return True if ``url`` points at another host (has a scheme or a host of its own).

    Browsers ignore tabs and newlines in URLs and read ``\\`` as ``/``, so ``/\\host/x`` and
    ``/<tab>/host/x`` are other hosts too.
    """
    normalized = re.sub(r"[\t\n\r]", "", url).strip().replace("\\", "/")
    parts = urlsplit(normalized)
    return bool(parts.scheme or parts.netloc)


def _drop_external_images(tag: str, attribute: str, value: str) -> str | None:
    if tag == "img" and attribute == "src" and is_external(value):
        return None
    return value


def sanitize(fragment: str) -> str:
    """Return ``fragment`` with everything outside the allow-lists removed."""
    allow_external_images = bool(settings.ALLOW_EXTERNAL_IMAGES)
    return nh3.clean(
        fragment,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        attribute_filter=None if allow_external_images else _drop_external_images,
        url_schemes=ALLOWED_URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def markdown_to_html(text: str) -> str:
    """Return ``text`` as unsanitized HTML (raw HTML passes through, as CommonMark says)."""
    return pyromark.html(text, options=MARKDOWN_OPTIONS)


def render_markdown(text: str) -> SafeString:
    """Return ``text`` rendered to sanitized HTML; raise :class:`RenderError` if it cannot be."""
    rendered = markdown_to_html(text)
    check_nesting(rendered)
    # Safe: nh3 has removed everything outside the allow-lists.
    return mark_safe(sanitize(rendered))


def render_body(text: str) -> SafeString:
    """Return a post body as safe HTML, or as escaped text if it cannot be rendered.

    The admin form refuses bodies that do not render; one saved some other way (a script,
    an older version) is kept readable rather than failing the save.
    """
    try:
        return render_markdown(text)
    except RenderError as exc:
        logger.warning("post body shown as plain text: %s", exc)
        return format_html("<pre>{}</pre>", text)


def excerpt_of(fragment: str, *, words: int = 40) -> str:
    """Return the first ``words`` words of sanitized HTML as plain text (escape to display)."""
    plain = html.unescape(nh3.clean(fragment[:EXCERPT_SOURCE_CHARS], tags=set()))
    return Truncator(" ".join(plain.split())).words(words, truncate=" …")


def excerpt(text: str, *, words: int = 40) -> str:
    """Return the first ``words`` words of a Markdown body as plain text."""
    return excerpt_of(render_body(text), words=words)


@dataclass(frozen=True)
class Rendered:
    """What a post stores of its body: sanitized HTML and a plain-text excerpt."""

    html: str
    excerpt: str


def render(text: str) -> Rendered:
    """Render a body for storing on its post (the only call that renders Markdown)."""
    body_html = render_body(text)
    return Rendered(html=str(body_html), excerpt=excerpt_of(body_html))
