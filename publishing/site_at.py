"""The site at a moment: which posts are live at a time T, and with which text.

One definition, pure, over data: the posts as they are now (:class:`Page`) and every change
scheduled for them (:class:`Change`), applied in the order the publish job applies them.
The job wakes at each due time, so changes go live in time order; at one instant its run
publishes, then takes down, then switches revisions, then does other apps' due work (a
release), and so does :func:`apply` (:data:`ORDER`). The rules are the job's:

- a publish makes a post that is not live, live, with the text it has;
- a takedown makes a live post not live, and sets aside its pending revisions (one written
  for the version that went down never goes live over whatever is published next);
- a new text (a revision, a release's revision item) goes live only on a post that is live
  at its time and has not had its revisions set aside; else it is superseded;
- a change that will not happen (a post whose publish failed, content a go-live check holds,
  a stopped release) changes nothing and is listed with why.

Reading the facts (:mod:`publishing.site_at_facts`) is separate; apps add the changes they
make at their time with :func:`add_change_source` (releases: each item at the release's time).
"""

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

PUBLISH, UNPUBLISH, NEW_TEXT = "publish", "unpublish", "new_text"

#: The order of the publish job's run at one instant: its own kinds, then other apps' work.
ORDER = {"publish": 0, "unpublish": 1, "revision": 2, "other": 3}


class Page(NamedTuple):
    """A post as the public site shows it (``live``), or would if it were live.

    Tuples, not dataclasses: a moment a week ahead makes a thousand of them per page view.
    """

    post_id: int
    title: str
    slug: str
    live: bool
    published_at: datetime | None
    body_html: str = ""
    excerpt: str = ""
    #: The revision whose text the page shows (None: the post's own): its body is read only
    #: for the one post a page shows.
    text_revision: int | None = None


class Change(NamedTuple):
    """One scheduled change of one post: at ``at``, in the job's ``order`` at that instant.

    ``kind`` is :data:`PUBLISH`, :data:`UNPUBLISH` or :data:`NEW_TEXT` (with its ``title``,
    ``excerpt`` and ``revision``, whose body is read only when the post is shown). ``source``
    says what it is in the editor's words ("its scheduled publish", "revision 3", "the
    release “Spring launch”"); ``why_not``, when set, why it will not happen.
    """

    at: datetime
    order: int
    post_id: int
    kind: str
    source: str
    title: str | None = None
    excerpt: str | None = None
    revision: int | None = None
    why_not: str = ""


@dataclass(frozen=True)
class Outcome:
    """What a change did at the moment shown: ``done``, or not, with ``why``."""

    change: Change
    done: bool
    why: str = ""


#: Why a new text did not go live: the job supersedes it so.
NOT_LIVE = "the post was not live at the revision's time"
SET_ASIDE = "the post was taken down before it, which set it aside"


def change_key(change: Change) -> tuple:
    """Return where ``change`` comes in the job's order: by time, then :data:`ORDER`, then post."""
    return (change.at, change.order, change.post_id)


def earliest(changes: Iterable[Change], count: int | None) -> list[Change]:
    """Return the first ``count`` of ``changes`` in the job's order (None: all of them)."""
    return sorted(changes, key=change_key)[:count]


def latest(changes: Iterable[Change], count: int | None) -> list[Change]:
    """Return the last ``count`` of ``changes`` in the job's order, the last first."""
    return sorted(changes, key=change_key, reverse=True)[:count]


def apply(
    pages: dict[int, Page], changes: Iterable[Change], moment: datetime
) -> tuple[dict[int, Page], list[Outcome]]:
    """Return the pages at ``moment`` and what each change due by then did, in order.

    ``pages`` are the posts as they are now; changes after ``moment`` are left out.
    """
    shown = dict(pages)
    set_aside: set[int] = set()
    outcomes = []
    due = sorted((c for c in changes if c.at <= moment), key=change_key)
    for change in due:
        page = shown.get(change.post_id)
        why = change.why_not or _why_not(change, page, set_aside)
        if why:
            outcomes.append(Outcome(change, False, why))
            continue
        if change.kind == PUBLISH:
            shown[change.post_id] = page._replace(live=True, published_at=change.at)
        elif change.kind == UNPUBLISH:
            shown[change.post_id] = page._replace(live=False)
            set_aside.add(change.post_id)
        else:
            shown[change.post_id] = page._replace(
                title=change.title, excerpt=change.excerpt or "", text_revision=change.revision
            )
        outcomes.append(Outcome(change, True))
    return shown, outcomes


def _why_not(change: Change, page: Page | None, set_aside: set[int]) -> str:
    """Return why ``change`` does nothing to ``page`` as it is at its time ("" if it applies)."""
    if page is None:
        return "the post no longer exists"
    if change.kind == PUBLISH:
        return "it is live already" if page.live else ""
    if change.kind == UNPUBLISH:
        return "" if page.live else "it is not live then"
    if change.post_id in set_aside:
        return SET_ASIDE
    return "" if page.live else NOT_LIVE


def page_key(page: Page, moment: datetime) -> tuple:
    """Return where ``page`` comes in the index at ``moment``: newest first (a live post with
    no time of going live is read as going live at the moment), then by id."""
    return (page.published_at or moment, page.post_id)


def newest_live(
    pages: Iterable[Page], moment: datetime, *, unseen_below: tuple | None
) -> list[Page]:
    """Return the live ``pages`` newest first, those whose place in the index is sure.

    ``pages`` are some of the posts at ``moment`` (the newest few now and those with the
    latest publishes by then); every post not among them comes below ``unseen_below`` (a
    :func:`page_key`; None: there is none), so a page at or above it is in its place, and one
    below it may yet have an unseen post before it.
    """
    live = sorted(
        (page for page in pages if page.live), key=lambda p: page_key(p, moment), reverse=True
    )
    if unseen_below is None:
        return live
    return [page for page in live if page_key(page, moment) >= unseen_below]


#: ``source(moment) -> changes``: an app's changes due by ``moment`` (releases').
ChangeSource = Callable[[datetime], list[Change]]

_sources: list[ChangeSource] = []


def add_change_source(source: ChangeSource) -> None:
    """Show the changes ``source`` makes at their time on the site at a moment (once,
    however often it is added)."""
    if source not in _sources:
        _sources.append(source)


def other_changes(moment: datetime) -> list[Change]:
    """Return the changes other apps make by ``moment``."""
    return [change for source in _sources for change in source(moment)]


def wanted(
    changes: Iterable[Change],
    *,
    posts: Collection[int] | None = None,
    only: str | None = None,
    first: int | None = None,
    last: int | None = None,
) -> list[Change]:
    """Return the ``changes`` of the posts ``posts`` (None: every post) of the kind ``only``
    (None: every kind), and the ``first`` or ``last`` so many of them in the job's order
    (None: all; the last ones last first)."""
    kept = [
        change
        for change in changes
        if (posts is None or change.post_id in posts) and (only is None or change.kind == only)
    ]
    if first is not None:
        return earliest(kept, first)
    if last is not None:
        return latest(kept, last)
    return kept
