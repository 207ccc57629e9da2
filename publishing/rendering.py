"""Markdown to safe HTML: the one place post bodies are turned into markup.

Bodies are rendered with Python-Markdown and then sanitized with ``nh3`` against an allow-list
of tags, attributes and URL schemes, so raw HTML, ``javascript:`` links and event-handler
attributes in a body are inert. Images must come from the site itself unless
``INSTATIC_ALLOW_EXTERNAL_IMAGES`` is on: an image on another host tells that host who read
the post and when (a tracking pixel). The public pages and the Atom feed both call
:func:`render_body`; the admin form calls :func:`render_markdown` to reject bodies that do not
render at all.
"""

import html
import logging
import re
from urllib.parse import urlsplit

import markdown
import nh3
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from publishing.conf import settings

logger = logging.getLogger(__name__)

MARKDOWN_EXTENSIONS = ["fenced_code", "tables", "sane_lists"]

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
    """A body that Markdown cannot render (e.g. nesting too deep)."""


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


def render_markdown(text: str) -> SafeString:
    """Return ``text`` rendered to sanitized HTML; raise :class:`RenderError` if it cannot be.

    A fresh ``Markdown`` instance per call: instances keep state and are not thread-safe.
    """
    try:
        rendered = markdown.Markdown(extensions=MARKDOWN_EXTENSIONS).convert(text)
    except (RecursionError, ValueError, IndexError, KeyError, AttributeError) as exc:
        raise RenderError(
            f"the body cannot be rendered as Markdown ({type(exc).__name__})"
        ) from exc
    # Safe: nh3 has removed everything outside the allow-lists.
    return mark_safe(sanitize(rendered))


def render_body(text: str) -> SafeString:
    """Return a post body as safe HTML for the public site and the feed.

    Bodies are checked when an editor saves them; one written some other way that still fails
    to render is shown as escaped text rather than failing the page.
    """
    try:
        return render_markdown(text)
    except RenderError:
        logger.exception("post body failed to render; showing it as plain text")
        return format_html("<pre>{}</pre>", text)


def excerpt(text: str, *, words: int = 40) -> str:
    """Return the first ``words`` words of a body as plain text (escape it when displaying)."""
    plain = html.unescape(nh3.clean(str(render_body(text)), tags=set()))
    return Truncator(" ".join(plain.split())).words(words, truncate=" …")
