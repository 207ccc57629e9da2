"""How the public index is cut into pages: pure functions shared by the view and the export.

The index lists the live posts newest first. Its pages are not counted from either end
(where one post going would move every page after it), but cut at *break posts*: a post
whose id is a multiple of the page size. A page after the front one starts at a break post
and runs to the next one, so a post that arrives, goes or changes touches only its own page
and its neighbours' links, wherever it is in the index; a page keeps its address (the
slug of the post it starts with, ``?from=<slug>``) for as long as that post is live. Ids are
handed out in order, so when posts go live in about the order they were written most pages
hold exactly the page size; posts published out of order make pages longer or shorter, the
page size on average.

The *front page* (``/``) holds at least a page's worth: the newest posts down to the first
break post at least ``per_page`` posts from the top. A post arriving at the top therefore
changes the front page and, at most, the page it hands over or takes back.
"""

import re
from collections.abc import Iterable, Iterator
from typing import TypeVar

Row = TypeVar("Row")

#: A page number as a visitor writes it: ASCII digits only (``str.isdigit`` also accepts
#: "²" and other digits ``int()`` refuses or reads differently), short enough that no
#: database is asked for an offset it cannot hold.
_PAGE_NUMBER = re.compile(r"[0-9]{1,15}")


def page_number(text: str | None) -> int | None:
    """Return the page number ``text`` names (a missing or empty one is page 1), else None.

    None for anything that is not a plain number from 1 up: the view answers it with the
    site's ordinary 404, as it does a number past the last page. Numbers are the index's
    old addresses (``?page=N``, counted from the newest post); the view redirects them.
    """
    if not text:
        return 1
    if not _PAGE_NUMBER.fullmatch(text):
        return None
    number = int(text)
    return number if number >= 1 else None


def is_break(post_id: int, per_page: int) -> bool:
    """Return True if a page of the index may start at the post ``post_id``."""
    return post_id % per_page == 0


def starts_page(post_id: int, *, newer: int, per_page: int) -> bool:
    """Return True if the post ``post_id``, with ``newer`` live posts above it, starts a page.

    A break post does, unless it is within the first ``per_page`` posts (the front page).
    """
    return newer >= per_page and is_break(post_id, per_page)


def pages(
    rows: Iterable[Row], *, per_page: int, post_id=lambda row: row[0], newer: int = 0
) -> Iterator[list[Row]]:
    """Cut ``rows`` (live posts, newest first) into the index's pages; yield each page's rows.

    ``newer``: how many live posts come before the first row (0: ``rows`` start at the top,
    and the first page is the front page, even an empty one). Otherwise the rows should
    start where a page does; rows before the first page start make a page of their own.
    """
    page: list[Row] = []
    for position, row in enumerate(rows, start=newer):
        if page and starts_page(post_id(row), newer=position, per_page=per_page):
            yield page
            page = []
        page.append(row)
    if page or newer == 0:
        yield page
