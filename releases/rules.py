"""What a release may hold and whether it can go out: pure functions over plain facts.

:mod:`releases.actions` reads the facts (under row locks when it writes) and does what
these decide; the admin shows the same answers. Nothing here touches the database, so every
rule is tested with tables (tests/releases/test_release_rules.py).
"""

from dataclasses import dataclass
from datetime import datetime

from publishing.models import PENDING_REVISION, PostStatus, RevisionStatus
from releases.models import ItemAction, ReleaseStatus

A = ItemAction
S = PostStatus
R = RevisionStatus


@dataclass(frozen=True)
class PostFacts:
    """What the rules need of a post: ``None`` in place of these means it was deleted."""

    status: str
    version: int
    # The post's planned takedown, if any: a post may not go live past it.
    unpublish_at: datetime | None = None
    # Why its content could not be published (empty when it can): title, slug, body.
    content_problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class RevisionFacts:
    """What the rules need of an item's revision: ``None`` in place of these means it is gone."""

    status: str
    post_id: int
    content_problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class ItemFacts:
    """One release item as it stands: what it does, what it pinned, and the post now."""

    action: str
    pinned_version: int
    post_id: int | None
    post: PostFacts | None
    revision: RevisionFacts | None = None


def action_for(post: PostFacts, *, has_pending_revision: bool) -> str | None:
    """Return the change a release makes to ``post`` when the editor names none.

    A draft or unpublished post is published; a live post with a pending revision gets it
    live. A live post without one could only be taken down, which an editor must ask for by
    name; ``None`` says so, as it does for a post scheduled on its own.
    """
    if post.status in (S.DRAFT, S.UNPUBLISHED):
        return A.PUBLISH
    if post.status == S.PUBLISHED and has_pending_revision:
        return A.REVISION
    return None


def add_problem(
    action: str,
    post: PostFacts,
    *,
    revision: RevisionFacts | None,
    other_release: str = "",
) -> str:
    """Return why ``action`` cannot be added for ``post`` (empty when it can).

    ``other_release`` names a pending release that holds the post already: a post goes out
    with one release at a time, or the first would always stop the second.
    """
    if other_release:
        return f"It is already in the release “{other_release}”; remove it there first."
    if action == A.PUBLISH:
        if post.status == S.SCHEDULED:
            return (
                "It is scheduled on its own; cancel its schedule first, and the release "
                "will publish it."
            )
        if post.status == S.PUBLISHED:
            return "It is live already; add its new revision, or take it down."
        return _content_problem(post.content_problems)
    if post.status != S.PUBLISHED:
        if action == A.REVISION:
            return "Only a live post's revision can go out with a release."
        return "Only a live post can be taken down."
    if action == A.REVISION:
        if revision is None:
            return "It has no pending revision: write one on the post's page first."
        return _content_problem(revision.content_problems)
    return ""


def item_problem(item: ItemFacts, *, now: datetime | None = None) -> str:
    """Return why ``item`` can no longer go out as it was added (empty when it can).

    The pinned version is what was reviewed: any later change of the post (its text, its
    state, its revisions) makes the item *changed*, to be refreshed or removed by an editor.
    ``now`` (the database time of the release) also checks a publish against the post's own
    takedown time.
    """
    post = item.post
    if post is None:
        return "The post was deleted."
    if post.version != item.pinned_version:
        return (
            "The post was changed after it was added to the release: check it, then "
            "refresh the item to release it as it is now, or remove it."
        )
    if item.action == A.PUBLISH:
        if post.status not in (S.DRAFT, S.UNPUBLISHED):
            return "The post is no longer a draft."
        if now is not None and post.unpublish_at is not None and post.unpublish_at <= now:
            return "The post's own unpublish time has passed: change or clear it."
        return _content_problem(post.content_problems)
    if post.status != S.PUBLISHED:
        return "The post is no longer live."
    if item.action == A.REVISION:
        revision = item.revision
        if revision is None or revision.post_id != item.post_id:
            return "Its revision is gone."
        if revision.status not in PENDING_REVISION:
            return "Its revision was cancelled, replaced or has gone live."
        return _content_problem(revision.content_problems)
    return ""


def release_problem(problems: list[tuple[str, str]]) -> str:
    """Return a release's problem in words from its items' ``(title, problem)`` pairs."""
    stopped = [(title, problem) for title, problem in problems if problem]
    if not stopped:
        return ""
    shown = "; ".join(f"“{title}”: {problem}" for title, problem in stopped[:5])
    more = len(stopped) - 5
    return shown + (f"; and {more} more item(s)" if more > 0 else "")


def _content_problem(problems: tuple[str, ...]) -> str:
    return "; ".join(problems)


def goes_out_on_repair(
    *, status: str, problem: str, release_at: datetime | None, now: datetime
) -> bool:
    """Return True if repairing the release (refreshing or removing an item) may send it out
    at once: it is scheduled, stopped, and its time has passed while it was stopped.

    An editor is asked first ("send it now, or keep it as a draft?"), so fixing a post never
    puts a launch live unannounced.
    """
    return (
        status == ReleaseStatus.SCHEDULED
        and bool(problem)
        and release_at is not None
        and release_at <= now
    )
