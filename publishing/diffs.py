"""Line diffs of two revisions' titles and bodies, for the admin's compare page.

Plain text in, plain text out: the template escapes every line (a body's raw HTML is shown as
text, never run). :func:`difflib.unified_diff` keeps three lines of context around changes.
"""

import difflib
import itertools
from dataclasses import dataclass

CONTEXT_LINES = 3


@dataclass(frozen=True)
class DiffLine:
    """One line of a diff; ``kind`` is ``added``, ``removed``, ``context`` or ``hunk``."""

    kind: str
    text: str


def _lines(title: str, body: str) -> list[str]:
    return [f"Title: {title}", "", *body.replace("\r\n", "\n").split("\n")]


def revision_diff(
    *, old_title: str, old_body: str, new_title: str, new_body: str
) -> list[DiffLine]:
    """Return the changes from the old title and body to the new ones (empty: identical)."""
    diff = difflib.unified_diff(
        _lines(old_title, old_body), _lines(new_title, new_body), n=CONTEXT_LINES, lineterm=""
    )
    lines: list[DiffLine] = []
    # The first two lines are the file headers (``---``, ``+++``): the page names the two
    # revisions itself. Later lines may start the same way (a removed "-- signature").
    for line in itertools.islice(diff, 2, None):
        if line.startswith("@@"):
            lines.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            lines.append(DiffLine("added", line[1:]))
        elif line.startswith("-"):
            lines.append(DiffLine("removed", line[1:]))
        else:
            lines.append(DiffLine("context", line[1:]))
    return lines
