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

A section added with ``new_posts=True`` is also shown on the page of a post not saved yet,
called with ``post`` None (media: an editor uploads and inserts images before the first save).
What the editor chose there is the section's to keep: a function added with
:func:`on_post_added` is called with ``(request, post)`` once the page has created the post,
in the save's transaction (media: the featured image chosen before the post existed).
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.http import HttpRequest
from django.utils.safestring import SafeString

from publishing.models import Post

Section = Callable[[HttpRequest, Post | None], SafeString | None]
#: A tool's function returns its link's words and address.
Tool = Callable[[HttpRequest, Post], tuple[str, str] | None]

_sections: list[Section] = []
_new_post_sections: list[Section] = []
_added: list[Callable[[HttpRequest, Post], object]] = []
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


def add_post_section(section: Section, *, new_posts: bool = False) -> None:
    """Show ``section`` on every post's admin page (once, however often it is added); with
    ``new_posts``, also on the page of a new post, called with ``post`` None."""
    if section not in _sections:
        _sections.append(section)
    if new_posts and section not in _new_post_sections:
        _new_post_sections.append(section)


def on_post_added(receiver: Callable[[HttpRequest, Post], object]) -> None:
    """Call ``receiver(request, post)`` after the post page created ``post`` (once, however
    often it is added), so a section shown on the new post's page keeps what was chosen there."""
    if receiver not in _added:
        _added.append(receiver)


def post_added(request: HttpRequest, post: Post) -> None:
    """Tell every receiver added with :func:`on_post_added` that the page created ``post``."""
    for receiver in _added:
        receiver(request, post)


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
    for a new post (``post`` None), only the sections added for new posts."""
    if post is None:
        return {
            "post_sections": _shown(_new_post_sections, request, None),
            "post_notices": [],
            "post_tools": [],
        }
    return {
        "post_sections": _shown(_sections, request, post),
        "post_notices": _shown(_notices, request, post),
        "post_tools": _shown(_tools, request, post),
    }


def _shown(added: list, request: HttpRequest, post: Post | None) -> list:
    return [shown for shown in (each(request, post) for each in added) if shown]
