"""What other apps add to a post's HTML as a page shows it: the one extension point between
the stored, sanitized body and the page (the public page, a preview link, the static export).

Publishing knows none of them: an app registers a function of ``(post_id, html, *, preview_until)``
that returns the HTML to show (the media app adds image sizes and the featured image this
way). ``preview_until`` is when the preview link being shown expires (None on public pages).
A function must keep the HTML safe: it only adds markup it builds and escapes itself.
"""

from collections.abc import Callable
from datetime import datetime

from django.utils.safestring import SafeString, mark_safe

BodyFilter = Callable[..., str]

_filters: list[BodyFilter] = []


def add_body_filter(body_filter: BodyFilter) -> None:
    """Pass every shown body through ``body_filter`` (once, however often it is added)."""
    if body_filter not in _filters:
        _filters.append(body_filter)


def page_body(post_id: int, body_html: str, *, preview_until: datetime | None = None) -> SafeString:
    """Return post ``post_id``'s stored HTML as its page shows it (every filter, in order added)."""
    shown = body_html
    for body_filter in _filters:
        shown = body_filter(post_id, shown, preview_until=preview_until)
    # Safe: sanitized by nh3 when the body was saved (publishing.rendering.render); the
    # filters add only markup they escape.
    return mark_safe(shown)
