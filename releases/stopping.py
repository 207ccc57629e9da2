"""Whether a release's items still apply, read from the database, and stopping one that can't.

The rules are pure (:mod:`releases.rules`); this reads their facts (the items, their
posts and revisions, locked when the caller is about to write) and records a release's
problem. A scheduled release is stopped as soon as one of its posts changes: every editor
action on a post calls :func:`stop_releases_holding` in its transaction, so the owner hears of
it before the release's time, not at it. At its time the release is checked again under its
posts' locks (:mod:`releases.apply`), so a change no action reported (a post taken
down at its own unpublish time) stops it there.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Length, Trim
from django.utils.translation import gettext as _

from coordination.wording import local_time
from publishing.actions import editor_name
from publishing.conf import settings
from publishing.models import Post, PostRevision
from publishing.row_locks import skip_locked
from publishing.validation import publish_problems
from releases import alerts as release_alerts
from releases import history as release_history
from releases.models import Release, ReleaseEvent, ReleaseItem, ReleaseStatus
from releases.rules import (
    ItemFacts,
    PostFacts,
    RevisionFacts,
    item_problem,
    release_problem,
)

logger = logging.getLogger(__name__)

RS = ReleaseStatus
PENDING = (RS.DRAFT, RS.SCHEDULED)


def post_facts(post_ids, *, lock: bool) -> dict[int, PostFacts]:
    """Return the facts of the posts in ``post_ids`` (locked, skipping rows others hold).

    ``post_ids`` is a list, or a query of ids (a release's: sent as a subquery, not as
    10,000 parameters).
    """
    rows = (
        Post.objects.filter(pk__in=post_ids)
        .annotate(body_length=Length(Trim("body")))
        .values_list("pk", "status", "version", "unpublish_at", "title", "slug", "body_length")
        .order_by("pk")
    )
    if lock:
        rows = skip_locked(rows)
    # Read once: per post, the setting cost more than the checks (as in publishing.batches).
    max_chars = int(settings.POST_BODY_MAX_CHARS)
    return {
        pk: PostFacts(
            status=status,
            version=version,
            unpublish_at=unpublish_at,
            content_problems=tuple(
                publish_problems(
                    title=title, slug=slug, body_length=body_length, max_chars=max_chars
                )
            ),
        )
        for pk, status, version, unpublish_at, title, slug, body_length in rows
    }


def revision_facts(revision_ids: list[int]) -> dict[int, RevisionFacts]:
    """Return the facts of the revisions in ``revision_ids`` (their posts hold the locks)."""
    rows = (
        PostRevision.objects.filter(pk__in=revision_ids)
        .annotate(body_length=Length(Trim("body")))
        .values_list("pk", "status", "post_id", "title", "post__slug", "body_length")
    )
    max_chars = int(settings.POST_BODY_MAX_CHARS)  # read once, as in post_facts
    return {
        pk: RevisionFacts(
            status=status,
            post_id=post_id,
            content_problems=tuple(
                publish_problems(
                    title=title, slug=slug, body_length=body_length, max_chars=max_chars
                )
            ),
        )
        for pk, status, post_id, title, slug, body_length in rows
    }


@dataclass(frozen=True)
class ItemRow:
    """A release item as read for checking and going out."""

    pk: int
    post_id: int | None
    post_title: str
    action: str
    revision_id: int | None
    pinned_version: int


def item_rows(release_ids) -> dict[int, list[ItemRow]]:
    rows = ReleaseItem.objects.filter(release_id__in=release_ids).order_by("id")
    items: dict[int, list[ItemRow]] = {pk: [] for pk in release_ids}
    for release_id, *values in rows.values_list(
        "release_id", "pk", "post_id", "post_title", "action", "revision_id", "pinned_version"
    ):
        items[release_id].append(ItemRow(*values))
    return items


@dataclass(frozen=True)
class Checked:
    """A release's items with their facts and problems; ``held`` counts posts others lock."""

    items: list[ItemRow]
    facts: list[ItemFacts]
    problems: list[str]
    held: int

    @property
    def problem(self) -> str:
        pairs = zip(self.items, self.problems, strict=True)
        return release_problem([(item.post_title, problem) for item, problem in pairs])


def check_items(
    items: list[ItemRow], *, now: datetime | None, lock: bool, release_id: int | None = None
) -> Checked:
    """Read the facts of ``items`` and what the rules say of each (see :func:`item_problem`).

    ``release_id`` says ``items`` are all of that release's, read by a subquery.
    """
    post_ids = [item.post_id for item in items if item.post_id is not None]
    wanted = (
        ReleaseItem.objects.filter(release_id=release_id).values("post_id")
        if release_id is not None
        else post_ids
    )
    posts = post_facts(wanted, lock=lock)
    revisions = revision_facts([item.revision_id for item in items if item.revision_id])
    facts = [
        ItemFacts(
            action=item.action,
            pinned_version=item.pinned_version,
            post_id=item.post_id,
            post=posts.get(item.post_id) if item.post_id is not None else None,
            revision=revisions.get(item.revision_id) if item.revision_id else None,
        )
        for item in items
    ]
    held = len(set(post_ids) - set(posts))
    problems = [
        item_problem(fact, now=now) if fact.post is not None or fact.post_id is None else ""
        for fact in facts
    ]
    return Checked(items=items, facts=facts, problems=problems, held=held)


def item_states(release: Release) -> list[tuple[ReleaseItem, str]]:
    """Return the release's items, each with its problem now (empty when it can go out)."""
    items = list(release.items.select_related("post", "revision").order_by("id"))
    rows = [
        ItemRow(i.pk, i.post_id, i.post_title, i.action, i.revision_id, i.pinned_version)
        for i in items
    ]
    checked = check_items(rows, now=None, lock=False)
    return list(zip(items, checked.problems, strict=True))


def pending_items(post_ids: Iterable[int]) -> dict[int, ReleaseItem]:
    """Return the item (with its release) of each of ``post_ids`` that a pending release
    (draft or scheduled) holds, by post id: one query however many posts. A post is in one
    pending release at a time."""
    items = ReleaseItem.objects.filter(
        post_id__in=list(post_ids), release__status__in=PENDING
    ).select_related("release")
    return {item.post_id: item for item in items}


def pending_item_of(post: Post) -> ReleaseItem | None:
    """Return ``post``'s item in the pending release that holds it, if any."""
    return pending_items([post.pk]).get(post.pk)


def stop(pk: int, problem: str, *, at: datetime, wait: bool = True, by: str = "") -> bool:
    """Record ``problem`` on a scheduled release not stopped yet; tell its owner on commit.

    ``wait=False`` (the publish job) leaves a release row another transaction holds alone
    rather than waiting for it: an editor changing it is looking at it, and the job checks it
    again under lock at its time; and its email goes on a thread of its own, so a slow mail
    server never holds up the job's loop. An editor's action sends it after its commit.
    """
    matching = Release.objects.filter(pk=pk, status=RS.SCHEDULED, problem="")
    if not wait and not skip_locked(matching.values_list("pk", flat=True)).exists():
        return False
    stopped = matching.update(problem=problem, version=F("version") + 1)
    if stopped:
        release_history.record(pk, ReleaseEvent.Kind.STOPPED, by=by, problem=problem)
        logger.warning("[publish-scheduler] release %s due at %s is stopped: %s", pk, at, problem)
        tell = release_alerts.tell_owner if wait else release_alerts.tell_owner_soon
        transaction.on_commit(partial(tell, pk), robust=True)
    return bool(stopped)


def stop_releases_holding(post_ids: list[int], *, wait: bool = True, by: str = "") -> list[int]:
    """Stop the scheduled releases whose items of ``post_ids`` no longer apply; return them.

    Only those posts' items are read, so an edit of one post in a release of 10,000 costs
    one item, not the release.
    """
    rows = [
        ItemRow(pk, post_id, title, action, revision_id, pinned)
        for pk, post_id, title, action, revision_id, pinned in ReleaseItem.objects.filter(
            post_id__in=post_ids, release__status=RS.SCHEDULED, release__problem=""
        ).values_list("pk", "post_id", "post_title", "action", "revision_id", "pinned_version")
    ]
    if not rows:
        return []
    release_of = dict(
        ReleaseItem.objects.filter(pk__in=[row.pk for row in rows]).values_list("pk", "release_id")
    )
    checked = check_items(rows, now=None, lock=False)
    by_release: dict[int, list[tuple[str, str]]] = {}
    for row, problem in zip(rows, checked.problems, strict=True):
        if problem:
            by_release.setdefault(release_of[row.pk], []).append((row.post_title, problem))
    times = dict(Release.objects.filter(pk__in=by_release).values_list("pk", "release_at"))
    return [
        pk
        for pk, problems in by_release.items()
        if stop(pk, release_problem(problems), at=times[pk], wait=wait, by=by)
    ]


def stop_on_change(post_ids: list[int], *, by_editor: bool, user=None) -> list[str]:
    """Stop the scheduled releases that ``post_ids``' change makes stale (a post-changed
    receiver, :mod:`publishing.hooks`); return what the editor who changed them reads."""
    by = editor_name(user) if by_editor else ""
    stopped = stop_releases_holding(post_ids, wait=by_editor, by=by)
    if not by_editor or not stopped:
        return []
    rows = Release.objects.filter(pk__in=stopped).order_by("release_at", "pk")
    return [stopped_text(name, at) for name, at in rows.values_list("name", "release_at")]


def stopped_text(name: str, at: datetime) -> str:
    """Say that an edit stopped the release ``name`` due ``at``, and what to do about it."""
    return _(
        "This stops the release “%(name)s” (due %(when)s), which sends its posts only as they "
        "were when added: on the release's page, refresh this post's item to send it as it is "
        "now, or remove it."
    ) % {"name": name, "when": local_time(at, seconds=False)}


def stop_releases_losing(post_ids: list[int]) -> list[int]:
    """Stop the scheduled releases holding ``post_ids``, which are about to be deleted."""
    rows = ReleaseItem.objects.filter(
        post_id__in=post_ids, release__status=RS.SCHEDULED, release__problem=""
    ).values_list("release_id", "post_title", "release__release_at")
    by_release: dict[int, tuple[list, datetime]] = {}
    for release_id, title, at in rows:
        by_release.setdefault(release_id, ([], at))[0].append((title, "The post was deleted."))
    return [
        pk
        for pk, (problems, at) in by_release.items()
        if stop(pk, release_problem(problems), at=at)
    ]


def new_draft_problem(post: Post) -> str:
    """Refuse a new draft of ``post`` (locked) that would set aside the draft revision a
    pending release goes out with: that would stop the release, whoever wrote the draft (a
    new-draft check, :mod:`publishing.hooks`)."""
    item = pending_item_of(post)
    if item is None or item.revision_id is None:
        return ""
    pinned = PostRevision.objects.filter(
        pk=item.revision_id, status=PostRevision.Status.DRAFT
    ).first()
    if pinned is None:
        return ""
    return (
        f"Revision {pinned.number} of “{post}” goes out with the release "
        f"“{item.release}”, so a new text cannot replace it now. Ask the release's owner "
        "to remove the post from the release first, or write the new text once the release "
        "has gone out."
    )
