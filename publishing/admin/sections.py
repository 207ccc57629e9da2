"""Sections, notices and tools other apps add to a post's admin page: sections below its
form, notices above it (what the editor must know before changing the post), tools beside
its "History" link at the top; and actions they add to the post list.

Publishing knows none of them: an app registers a function of ``(request, post)`` that
returns the section's or notice's HTML, or a tool's label and address, or ``None`` when it
has nothing to show that user (the outbox shows the deliveries of the post's events, and a
post's "Watch" link, this way; releases say that the post goes out with one). A list action
is a Django admin action (``@admin.action``) added with :func:`add_post_list_action`, and a
list column (:class:`ListColumn`: reviews' "Review", releases' "Release") with
:func:`add_post_list_column`; a column's cells are read for the page's posts at once.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.http import HttpRequest
from django.utils.safestring import SafeString

from publishing.models import Post

Section = Callable[[HttpRequest, Post], SafeString | None]
#: A tool's function returns its link's words and address.
Tool = Callable[[HttpRequest, Post], tuple[str, str] | None]

_sections: list[Section] = []
_notices: list[Section] = []
_tools: list[Tool] = []
_list_actions: list[Callable] = []


@dataclass(frozen=True)
class ListColumn:
    """A column other apps add to the post list, after the status.

    ``cells`` is given the page's posts and returns each one's cell (text or safe HTML) by
    post id, in as few queries as it can (one); a post it leaves out shows "—". ``name``
    names the column in the page (``column-<name>``, ``field-<name>``).
    """

    name: str
    label: str
    cells: Callable[[Iterable[Post]], dict[int, str | SafeString]]


_list_columns: list[ListColumn] = []


def add_post_section(section: Section) -> None:
    """Show ``section`` on every post's admin page (once, however often it is added)."""
    if section not in _sections:
        _sections.append(section)


def add_post_notice(notice: Section) -> None:
    """Show ``notice`` above every post's form (once, however often it is added)."""
    if notice not in _notices:
        _notices.append(notice)


def add_post_tool(tool: Tool) -> None:
    """Show ``tool``'s link at the top of every post's admin page (once, however often)."""
    if tool not in _tools:
        _tools.append(tool)


def add_post_list_action(action: Callable) -> None:
    """Offer ``action`` (an admin action function) on the post list, after publishing's own."""
    if action not in _list_actions:
        _list_actions.append(action)


def add_post_list_column(column: ListColumn) -> None:
    """Show ``column`` on the post list, after the status (once, however often it is added)."""
    if column not in _list_columns:
        _list_columns.append(column)


def post_list_columns() -> list[ListColumn]:
    """Return the post list's columns other apps added, in the order they were added."""
    return list(_list_columns)


def post_list_actions() -> list[Callable]:
    """Return the post list's actions other apps added, in the order they were added."""
    return list(_list_actions)


def page_context(request: HttpRequest, post: Post | None) -> dict:
    """Return the post page's ``post_sections`` and ``post_notices`` (HTML) and
    ``post_tools`` (words, address) for ``request``'s user, each in the order they were added;
    none for a new post."""
    return {
        "post_sections": _shown(_sections, request, post),
        "post_notices": _shown(_notices, request, post),
        "post_tools": _shown(_tools, request, post),
    }


def _shown(added: list, request: HttpRequest, post: Post | None) -> list:
    if post is None:
        return []
    return [shown for shown in (each(request, post) for each in added) if shown]
