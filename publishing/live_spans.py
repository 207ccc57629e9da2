"""When each revision of a post was live, and which one is live now, for the revisions page.

Worked out from the revisions alone (plus what the post shows now), so the page needs no
extra query: a revision that went live was live until the next one went live; the last one
to go live is live now only while the post is on the site with that revision's title and
body (a post taken off the site, or republished with other text, shows no revision).
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

WENT_LIVE = "published"  # PostRevision.Status.PUBLISHED, kept here so this stays pure


@dataclass(frozen=True)
class LiveSpan:
    """When a revision was on the site: from ``since`` to ``until`` (None: to now, or unknown)."""

    live_now: bool
    since: datetime
    until: datetime | None


def live_spans(
    revisions: Iterable, *, post_is_live: bool, live_title: str, live_body: str
) -> dict[int, LiveSpan]:
    """Return each went-live revision's span by number; the others have none.

    ``revisions`` have ``number``, ``status``, ``published_at``, ``title`` and ``body``;
    whether the post is live, with its title and body, says if the last is still on the site.
    Revisions that went live at the same instant are ordered by number.
    """
    went_live = sorted(
        (r for r in revisions if r.status == WENT_LIVE and r.published_at is not None),
        key=lambda r: (r.published_at, r.number),
    )
    spans: dict[int, LiveSpan] = {}
    for revision, following in zip(went_live, [*went_live[1:], None], strict=False):
        if following is not None:
            spans[revision.number] = LiveSpan(False, revision.published_at, following.published_at)
        else:
            shown = (revision.title, revision.body) == (live_title, live_body)
            live_now = post_is_live and shown
            spans[revision.number] = LiveSpan(live_now, revision.published_at, None)
    return spans
