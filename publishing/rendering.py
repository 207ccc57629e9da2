"""Markdown to safe HTML: the one place post bodies are turned into markup.

A body is rendered once, when it is saved (:func:`render`, called by
``posts.save_post``); the post keeps the HTML and the excerpt, and page views only read
them. Rendering is pyromark (pulldown-cmark, in Rust: linear in the length of the body, and
about a hundred times faster than a pure-Python parser on hostile input) followed by ``nh3``
against an allow-list of tags, attributes and URL schemes, so raw HTML, ``javascript:`` links
and event-handler attributes in a body are inert.

No element of the stored HTML is nested more than :data:`MAX_NESTING` deep: the depth is
counted on the sanitized output (:func:`check_depth`), the tree nh3's HTML5 parser actually
built, which can be far deeper than the body's tags say (a formatting element's end tag met
inside a block nests copies around it). That parser also takes time with the square of the
depth it builds and copies formatting elements left open into every later block, so before
it runs :func:`check_nesting` refuses, in one pass over the tags, bodies that could nest or
copy without bound (a body without a "<", Markdown alone, renders to well-formed HTML, whose
depth is counted directly). Either refusal is a :class:`RenderError`: the admin form says so, and a
body written some other way is shown as text. Checking a body in the form and saving it
render it once (the last few results are kept, :func:`_rendered`).

Images must come from the site itself unless ``INSTATIC_ALLOW_EXTERNAL_IMAGES`` is on: an
image on another host tells that host who read the post and when (a tracking pixel).
"""

import html
import logging
import re
from dataclasses import dataclass
from functools import lru_cache
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
# A tag's slash, name and the rest of it (up to the next "<" or ">": a "<" inside an attribute
# value then reads as another tag, which only counts more).
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)([^<>]*)")

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


# What HTML's tree builder treats specially (the WHATWG "in body" rules). A formatting element
# left open when its parent closes stays on the list of active formatting elements, and the
# parser opens a copy of it wherever text comes next (again after every element that closes
# it), and its end tag met inside a block keeps the block open and nests copies of the
# formatting elements around it: either way copies pile up, in depth and in number, far
# beyond the tags of the body.
FORMATTING_ELEMENTS = frozenset(
    ["a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong"]
    + ["tt", "u"]
)
# A formatting element's end tag does not reach past these (the parser ignores it).
SCOPE_BOUNDARIES = frozenset(
    ["applet", "caption", "html", "marquee", "object", "table", "td", "template", "th"]
)
# A start tag of the key closes these while one of them is the innermost open element
# (formatting elements aside): a new list item ends the one before, a row its cells and row.
_CELLS = frozenset(["td", "th"])
_ROWS = _CELLS | {"tr"}
CLOSES_SIBLINGS = {
    "dd": frozenset(["dd", "dt"]),
    "dt": frozenset(["dd", "dt"]),
    "li": frozenset(["li"]),
    "option": frozenset(["option"]),
    "p": frozenset(["p"]),
    "td": _CELLS,
    "th": _CELLS,
    "tr": _ROWS,
    "tbody": _ROWS | {"tbody", "tfoot", "thead"},
    "tfoot": _ROWS | {"tbody", "tfoot", "thead"},
    "thead": _ROWS | {"tbody", "tfoot", "thead"},
}
# Elements a body may make (its Markdown's and its HTML's): a hundred times more than a
# long real post, and a bound on the sanitizer's work.
MAX_ELEMENTS = 50_000
# Characters of formatting start tags the parser may copy, over the whole body, before a body
# is refused: twice the longest body is far more than real posts need, and bounds the copies.
MAX_COPIED_MARKUP = 400_000


def check_size(fragment: str) -> None:
    """Raise :class:`RenderError` if ``fragment`` may make more than :data:`MAX_ELEMENTS`."""
    if fragment.count("<") > 2 * MAX_ELEMENTS:
        raise RenderError(f"the body makes more than {MAX_ELEMENTS:,} HTML elements")


def check_nesting(
    fragment: str, *, limit: int = MAX_NESTING, max_copied: int = MAX_COPIED_MARKUP
) -> None:
    """Raise :class:`RenderError` if parsing ``fragment`` could nest or copy without bound.

    The cost guard run before the sanitizer parses the HTML: nh3's tree builder takes time
    with the square of the depth it builds, and copies formatting elements as described
    above. One pass over the tags, erring on the side of more: an end tag closes the innermost
    open element of its name and the elements inside it, except that formatting elements are
    only ever closed by their own end tag (never by their parent's, nor across a scope
    boundary), and every other tag met while formatting elements are open counts their start
    tags as copied. More than ``limit`` elements open, or more than ``max_copied`` characters
    copied, is refused. The depth of the tree actually built is checked on the sanitized
    output (:func:`check_depth`).
    """
    check_size(fragment)
    names: list[str] = []  # the open elements, outermost first
    sizes: list[int] = []  # each one's start tag length if it is a formatting element, else 0
    open_formatting = 0  # characters of the formatting start tags open
    copied = 0
    for match in _TAG.finditer(fragment):
        slash, tag, rest = match.groups()
        name = tag.lower()
        formatting = name in FORMATTING_ELEMENTS
        if open_formatting and not formatting:
            copied += open_formatting
            if copied > max_copied:
                raise RenderError(
                    "the body leaves formatting tags (such as <b> or <a>) open around too many "
                    "other elements; close each where it should end"
                )
        if slash:
            if names and names[-1] == name:  # the common case: it closes the innermost
                names.pop()
                open_formatting -= sizes.pop()
            else:
                _close(names, sizes, name)
                open_formatting = sum(sizes)
            continue
        if name in VOID_ELEMENTS:
            continue
        siblings = CLOSES_SIBLINGS.get(name)
        if siblings and names:
            if names[-1] in siblings:  # the common case: the item before, innermost
                names.pop()
                sizes.pop()
            if names and (sizes[-1] or names[-1] in siblings):
                _close_siblings(names, sizes, siblings)
        size = len(tag) + len(rest) + 2 if formatting else 0
        names.append(name)
        sizes.append(size)
        open_formatting += size
        if len(names) > limit:
            raise RenderError(f"the body nests elements more than {limit} deep")


def _close(names: list[str], sizes: list[int], name: str) -> None:
    """Close the innermost open ``name`` as :func:`check_nesting` counts it."""
    try:
        at = len(names) - 1 - names[::-1].index(name)
    except ValueError:
        return  # a stray end tag is ignored
    if name in FORMATTING_ELEMENTS:
        if SCOPE_BOUNDARIES.isdisjoint(names[at + 1 :]):
            del names[at], sizes[at]
        return
    # The other elements inside it close; its formatting elements stay (they are copied).
    kept = [(n, size) for n, size in zip(names[at + 1 :], sizes[at + 1 :], strict=True) if size]
    del names[at:], sizes[at:]
    names.extend(n for n, _ in kept)
    sizes.extend(size for _, size in kept)


def _close_siblings(names: list[str], sizes: list[int], siblings: frozenset) -> None:
    """Close the innermost open elements other than formatting ones while in ``siblings``."""
    while True:
        at = len(names) - 1
        while at >= 0 and sizes[at]:
            at -= 1
        if at < 0 or names[at] not in siblings:
            return
        _close(names, sizes, names[at])


# The sanitizer's output: every "<" there starts a tag (nh3 escapes it in text and in
# attribute values), and tag names are lower case.
_OUTPUT_TAG = re.compile(r"<(/?[a-z][a-z0-9]*)")


def nesting_depth(html_text: str) -> int:
    """Return how many elements deep the tree of sanitized ``html_text`` goes.

    nh3 serializes the tree it built with every element it keeps closed by its end tag (void
    elements aside) and escapes every other "<", so its start and end tags, in order, walk
    that tree: the depth is the most start tags open at once. (The tests check this against
    :class:`html.parser.HTMLParser`, which reads the same, at a tenth of the speed.)
    """
    depth = deepest = 0
    # Strings, not tuples: a list of a hundred thousand tuples keeps the garbage collector busy.
    for tag in _OUTPUT_TAG.findall(html_text):
        if tag[0] == "/":
            depth -= 1
        elif tag not in VOID_ELEMENTS:
            depth += 1
            if depth > deepest:
                deepest = depth
    return deepest


def check_depth(html_text: str, *, limit: int = MAX_NESTING) -> None:
    """Raise :class:`RenderError` if sanitized ``html_text`` nests more than ``limit`` deep."""
    if nesting_depth(html_text) > limit:
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
    """Return ``text`` rendered to sanitized HTML; raise :class:`RenderError` if it cannot be.

    The result of the last few bodies is kept (:func:`_rendered`), so that checking a body
    in the editor's form and saving it render it once.
    """
    sanitized, problem = _rendered(text, bool(settings.ALLOW_EXTERNAL_IMAGES))
    if problem:
        raise RenderError(problem)
    # Safe: nh3 has removed everything outside the allow-lists.
    return mark_safe(sanitized)


@lru_cache(maxsize=4)
def _rendered(text: str, allow_external_images: bool) -> tuple[str, str]:
    """Return ``text`` as sanitized HTML and "", or "" and why it cannot be rendered.

    Keyed by the setting that changes the output too. A handful of bodies: the ones being
    checked and saved right now (a 200,000-character body and its HTML are about a megabyte).
    """
    markup = markdown_to_html(text)
    try:
        if "<" in text:
            check_nesting(markup)
        else:
            # Markdown alone (no raw HTML, no autolink) renders to well-formed HTML, which
            # the sanitizer's parser builds as written: its depth is counted as for the output.
            check_size(markup)
            check_depth(markup)
        sanitized = sanitize(markup)
        check_depth(sanitized)
    except RenderError as exc:
        return "", str(exc)
    return sanitized, ""


# The images of sanitized HTML (nh3 double-quotes every attribute value and escapes "<", ">").
_IMAGE = re.compile(r"<img\b([^>]*)>")
_SRC = re.compile(r'\bsrc="([^"]*)"')
_ALT = re.compile(r'\balt="([^"]*)"')


def images_without_alt(html_text: str) -> list[str]:
    """Return the addresses of the images of sanitized ``html_text`` that have no alt text."""
    missing = []
    for attributes in _IMAGE.findall(html_text):
        alt = _ALT.search(attributes)
        if alt is None or not html.unescape(alt.group(1)).strip():
            src = _SRC.search(attributes)
            missing.append(html.unescape(src.group(1)) if src else "")
    return missing


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
