"""How the public index is paged: which page a query string asks for.

Pure functions over values, shared by the index view and the static export.
"""

import re

#: A page number as a visitor writes it: ASCII digits only (``str.isdigit`` also accepts
#: "²" and other digits ``int()`` refuses or reads differently), short enough that no
#: database is asked for an offset it cannot hold.
_PAGE_NUMBER = re.compile(r"[0-9]{1,15}")


def page_number(text: str | None) -> int | None:
    """Return the page number ``text`` names (a missing or empty one is page 1), else None.

    None for anything that is not a plain number from 1 up: the view answers it with the
    site's ordinary 404, as it does a number past the last page.
    """
    if not text:
        return 1
    if not _PAGE_NUMBER.fullmatch(text):
        return None
    number = int(text)
    return number if number >= 1 else None
