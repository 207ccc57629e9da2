"""Sections and tools other apps add to a post's admin page: sections below its form, tools
beside its "History" link at the top.

Publishing knows none of them: an app registers a function of ``(request, post)`` that
returns the section's HTML, or a tool's label and address, or ``None`` when it has nothing
to show that user (the outbox shows the deliveries of the post's events, and a post's
"Watch" link, this way).
"""

from collections.abc import Callable

from django.http import HttpRequest
from django.utils.safestring import SafeString

from publishing.models import Post

Section = Callable[[HttpRequest, Post], SafeString | None]
#: A tool's function returns its link's words and address.
Tool = Callable[[HttpRequest, Post], tuple[str, str] | None]

_sections: list[Section] = []
_tools: list[Tool] = []


def add_post_section(section: Section) -> None:
    """Show ``section`` on every post's admin page (once, however often it is added)."""
    if section not in _sections:
        _sections.append(section)


def post_sections(request: HttpRequest, post: Post | None) -> list[SafeString]:
    """Return the sections' HTML for ``post``'s page, in the order they were added."""
    if post is None:
        return []
    return [html for html in (section(request, post) for section in _sections) if html]


def add_post_tool(tool: Tool) -> None:
    """Show ``tool``'s link at the top of every post's admin page (once, however often)."""
    if tool not in _tools:
        _tools.append(tool)


def post_tools(request: HttpRequest, post: Post | None) -> list[tuple[str, str]]:
    """Return the tools' (words, address) for ``post``'s page, in the order they were added."""
    if post is None:
        return []
    return [link for link in (tool(request, post) for tool in _tools) if link]
