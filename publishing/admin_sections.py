"""Sections other apps add to a post's admin page, below its form.

Publishing knows none of them: an app registers a function of ``(request, post)`` that
returns the section's HTML, or ``None`` when it has nothing to show that user (the outbox
shows the deliveries of the post's events this way).
"""

from collections.abc import Callable

from django.http import HttpRequest
from django.utils.safestring import SafeString

from publishing.models import Post

Section = Callable[[HttpRequest, Post], SafeString | None]

_sections: list[Section] = []


def add_post_section(section: Section) -> None:
    """Show ``section`` on every post's admin page (once, however often it is added)."""
    if section not in _sections:
        _sections.append(section)


def post_sections(request: HttpRequest, post: Post | None) -> list[SafeString]:
    """Return the sections' HTML for ``post``'s page, in the order they were added."""
    if post is None:
        return []
    return [html for html in (section(request, post) for section in _sections) if html]
