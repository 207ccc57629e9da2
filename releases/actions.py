"""Releases: the editor actions that put them together, schedule them and send them out.

Each action (create, add, remove and refresh an item, schedule, unschedule, cancel, release
now) locks the release's row and compares its ``version`` with the one the editor's page was
loaded with, as the post actions do (:class:`EditConflict`), so two editors changing one
release never lose each other's change. Adding or refreshing an item locks its post too and
pins the post's version: what goes out is what the editor saw. The rules (what may be added)
are pure functions in :mod:`releases.rules`; whether items still apply is
:mod:`releases.stopping`; going out is :mod:`releases.apply`, for "release
now" as for the publish job.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from coordination.clock import database_now
from coordination.services import request_wakeup
from publishing import go_live
from publishing.actions import (
    EditorAction,
    edit_conflict,
    editor_name,
    person_name,
    require_permission,
    user_or_none,
)
from publishing.exceptions import EditConflict, InvalidSchedule, InvalidTransition, NotPublishable
from publishing.job_names import PUBLISH_JOB
from publishing.models import PENDING_REVISION, Post, PostRevision, PublishEvent
from publishing.validation import schedule_problems
from releases import apply as release_apply
from releases import history as release_history
from releases import reviewing
from releases import stopping as checks
from releases.models import ItemAction, Release, ReleaseEvent, ReleaseItem, ReleaseStatus
from releases.rules import (
    action_for,
    add_problem,
    goes_out_on_repair,
)
from reviews.models import Review

logger = logging.getLogger(__name__)

A = ItemAction
S = Post.Status
R = PostRevision.Status
RS = ReleaseStatus
K = PublishEvent.Kind
EV = ReleaseEvent.Kind

PENDING = checks.PENDING


@dataclass
class ReleaseAction:
    """One editor action on a release whose row is locked: ``current`` is that row."""

    current: Release
    user: object

    def change(self, **values) -> None:
        """Set ``values`` on the release, add one to its version and record who changed it."""
        current = self.current
        updated = Release.objects.filter(pk=current.pk, version=current.version).update(
            version=F("version") + 1, updated_at=Now(), updated_by=editor_name(self.user), **values
        )
        if not updated:
            # Unreachable while the row lock is held; kept so a change can never be blind.
            raise InvalidTransition(f"“{current}” changed while being saved; reload and try again.")
        current.version += 1

    def record(self, kind: str, **data) -> None:
        """Write one step of the release's history, by this action's editor."""
        release_history.record(self.current.pk, kind, by=editor_name(self.user), **data)

    def require_pending(self, action: str) -> None:
        if not self.current.is_pending:
            raise InvalidTransition(
                f"Cannot {action} “{self.current}”: it is {self.current.get_status_display()}."
            )

    def items_changed(self) -> None:
        """Send a scheduled release whose items changed back to review, if reviews are on.

        Its new items were not approved: it goes back to draft with a new submission.
        """
        current = self.current
        if current.status != RS.SCHEDULED or reviewing.is_release_approved(current):
            return
        self.change(status=RS.DRAFT)
        current.status = RS.DRAFT
        reviewing.submit_items_again(current, user=self.user)
        self.record(
            EV.SENT_TO_REVIEW,
            problem=_("Its posts changed after it was approved: a reviewer approves it again."),
        )

    def hold_if_past_due(self) -> None:
        """Take a stopped release whose time has passed back to draft, so the repair being
        made does not send it out at once; it waits for an editor to schedule it again."""
        current = self.current
        if not goes_out_on_repair(
            status=current.status,
            problem=current.problem,
            release_at=current.release_at,
            now=database_now(),
        ):
            return
        self.change(status=RS.DRAFT, problem="")
        current.status, current.problem = RS.DRAFT, ""
        self.record(
            EV.UNSCHEDULED,
            problem=_("Its time passed while it was stopped; kept as a draft when repaired."),
        )

    def recheck(self) -> None:
        """Clear (or renew) a stopped release's problem after one of its items changed."""
        current = Release.objects.get(pk=self.current.pk)
        if not current.problem:
            return
        items = checks.item_rows([current.pk])[current.pk]
        problem = checks.check_items(items, now=None, lock=False).problem
        if problem != current.problem:
            Release.objects.filter(pk=current.pk).update(problem=problem)
            if not problem:
                self.record(EV.READY)
            if not problem and current.status == RS.SCHEDULED:
                request_wakeup(PUBLISH_JOB, at=current.release_at, skip_locked=True)


def release_conflict(current: Release, expected_version: int | None) -> EditConflict | None:
    """Return the conflict of a change made against ``expected_version`` of ``current``.

    ``None`` as the expected version means "whatever is there now". The release form calls
    this to merge a stale submission; the actions call it under the row lock.
    """
    if expected_version is None or expected_version == current.version:
        return None
    return EditConflict(
        title=current.name,
        changed_by=person_name(current.updated_by),
        changed_at=current.updated_at,
        status_label=current.get_status_display(),
        version=current.version,
    )


@contextmanager
def release_action(
    release: Release, *, user, expected_version: int | None
) -> Iterator[ReleaseAction]:
    """Open a transaction, lock the release's row (checking its version) and yield the action."""
    with transaction.atomic():
        current = Release.objects.select_for_update().get(pk=release.pk)
        conflict = release_conflict(current, expected_version)
        if conflict is not None:
            raise conflict
        yield ReleaseAction(current=current, user=user)


def create_release(*, name: str, user, release_at: datetime | None = None) -> Release:
    """Create an empty draft release named ``name`` (its time is only planned until scheduled)."""
    require_permission(user, "put together releases")
    name = name.strip()
    if not name:
        raise InvalidTransition(_("A release needs a name."))
    if release_at is not None:
        _check_time(release_at)
    user = user_or_none(user)
    with transaction.atomic():
        release = Release.objects.create(
            name=name[:200], release_at=release_at, owner=user, updated_by=editor_name(user)
        )
        planned = {"release_at": release_at} if release_at is not None else {}
        release_history.record(release.pk, EV.CREATED, by=editor_name(user), **planned)
    return release


def submit_release(*, release: Release, user, note: str = "") -> Review:
    """Submit ``release``'s items, as they are pinned now, for review."""
    require_permission(user, "submit releases for review")
    with release_action(release, user=user, expected_version=None) as act:
        act.require_pending("submit")
        if not act.current.items.exists():
            raise InvalidTransition(f"“{act.current}” has no items yet: add posts to it first.")
        return reviewing.submit(act.current, user=user, note=note)


def _pending_revision(post: Post) -> PostRevision | None:
    """Return the post's newest pending revision (the one an editor means), if any."""
    return (
        PostRevision.objects.filter(post=post, status__in=PENDING_REVISION)
        .order_by("-number")
        .first()
    )


def _other_release(post: Post, release: Release) -> str:
    held = checks.pending_item_of(post)
    return held.release.name if held is not None and held.release_id != release.pk else ""


def _pin(release: Release, post: Post, action: str | None, *, user) -> dict:
    """Check ``post`` (locked) for ``action`` in ``release``; return the item's pinned values.

    A revision scheduled on its own is taken into the release (its own time dropped, the
    post's version moved, as scheduling a revision moves it), so it goes out with the
    release and never before.
    """
    facts = checks.post_facts([post.pk], lock=False)[post.pk]
    revision = _pending_revision(post) if facts.status == S.PUBLISHED else None
    if action is None:
        action = action_for(facts, has_pending_revision=revision is not None)
        if action is None:
            if facts.status == S.SCHEDULED:
                raise InvalidTransition(add_problem(A.PUBLISH, facts, revision=None))
            raise InvalidTransition(
                f"“{post}” is live and has no pending revision: to take it down with the "
                "release, add it with “Take the post down”."
            )
    revision_facts = checks.revision_facts([revision.pk])[revision.pk] if revision else None
    problem = add_problem(
        action,
        facts,
        revision=revision_facts if action == A.REVISION else None,
        other_release=_other_release(post, release),
    )
    if problem:
        raise InvalidTransition(f"“{post}” cannot go out with “{release}”: {problem}")
    version = facts.version
    if action == A.REVISION and revision.status == R.SCHEDULED:
        PostRevision.objects.filter(pk=revision.pk, status=R.SCHEDULED).update(
            status=R.DRAFT, publish_at=None
        )
        data = {"revision": revision.number, "release": release.pk, "release_name": release.name}
        EditorAction(current=post, user=user).change(K.REVISION_SCHEDULED, data=data, public=False)
        version += 1
    return {
        "action": action,
        "revision": revision if action == A.REVISION else None,
        "pinned_version": version,
        "post_title": str(post)[:200],
    }


def add_item(
    *,
    release: Release,
    post: Post,
    action: str | None = None,
    user,
    expected_version: int | None = None,
) -> ReleaseItem:
    """Add ``post`` to ``release``, pinned to its version now; ``action`` None picks the usual.

    A post is in one pending release at a time, and only once.
    """
    require_permission(user, "add posts to releases")
    # The post's row first, then the release's: the order every post action takes (it
    # locks the post, then stops the releases holding it), so no two wait for each other.
    with transaction.atomic():
        locked = Post.objects.select_for_update().get(pk=post.pk)
        with release_action(release, user=user, expected_version=expected_version) as act:
            act.require_pending("add posts to")
            item = _add(act, locked, action, user=user)
    return item


def _add(act: ReleaseAction, locked: Post, action: str | None, *, user) -> ReleaseItem:
    if ReleaseItem.objects.filter(release=act.current, post=locked).exists():
        raise InvalidTransition(f"“{locked}” is in “{act.current}” already.")
    pinned = _pin(act.current, locked, action, user=user)
    item = ReleaseItem.objects.create(
        release=act.current, post=locked, added_by=user_or_none(user), **pinned
    )
    act.change()
    act.record(EV.ITEM_ADDED, title=item.post_title, action=item.action)
    act.items_changed()
    return item


def remove_item(*, item: ReleaseItem, user, hold: bool = False) -> None:
    """Take ``item`` out of its release; a release it stopped can go out again.

    A change of that item only: it never conflicts with a colleague's change of another.
    ``hold`` keeps a stopped release whose time has passed from going out at once: it goes
    back to draft in the same transaction (see :func:`goes_out_on_repair`).
    """
    require_permission(user, "change releases")
    with release_action(item.release, user=user, expected_version=None) as act:
        act.require_pending("remove items from")
        removed = ReleaseItem.objects.filter(pk=item.pk, release=act.current)
        gone = removed.values("post_title", "action").first()
        removed.delete()
        act.change()
        if gone is not None:
            act.record(EV.ITEM_REMOVED, title=gone["post_title"], action=gone["action"])
        if hold:
            act.hold_if_past_due()
        act.items_changed()
        act.recheck()


def refresh_item(
    *, item: ReleaseItem, user, seen_post_version: int | None = None, hold: bool = False
) -> ReleaseItem:
    """Pin ``item`` to its post as it is now, after an editor checked the change.

    ``seen_post_version`` is the post's version the editor's page showed: if the post changed
    again since, nothing is pinned (:class:`EditConflict`), so no version the editor did not
    see goes out. Refreshing one item is a change of that item only, so it never conflicts
    with a colleague's change of another item. ``hold`` is as for :func:`remove_item`.
    """
    require_permission(user, "change releases")
    post_id = ReleaseItem.objects.filter(pk=item.pk).values_list("post_id", flat=True).first()
    if post_id is None:
        raise InvalidTransition(
            f"The post of “{item.post_title}” was deleted: remove the item instead."
        )
    # The post's row first, then the release's (see add_item).
    with transaction.atomic():
        locked = Post.objects.select_for_update().get(pk=post_id)
        with release_action(item.release, user=user, expected_version=None) as act:
            _refresh(act, item, locked, seen_post_version, user=user, hold=hold)
    item.refresh_from_db()
    return item


def _refresh(
    act: ReleaseAction, item: ReleaseItem, locked: Post, seen_post_version, *, user, hold: bool
):
    act.require_pending("refresh items of")
    current = ReleaseItem.objects.get(pk=item.pk, release=act.current, post=locked)
    conflict = edit_conflict(locked, seen_post_version)
    if conflict is not None:
        raise conflict
    pinned = _pin(act.current, locked, current.action, user=user)
    ReleaseItem.objects.filter(pk=current.pk).update(
        pinned_version=pinned["pinned_version"],
        revision=pinned["revision"],
        post_title=pinned["post_title"],
    )
    act.change()
    act.record(EV.ITEM_REFRESHED, title=pinned["post_title"], action=current.action)
    if hold:
        act.hold_if_past_due()
    act.items_changed()
    act.recheck()


def _check_time(release_at: datetime, *, changed: bool = True) -> None:
    errors = schedule_problems(
        publish_at=release_at, unpublish_at=None, now=database_now(), check_publish_future=changed
    )
    if errors:
        raise InvalidSchedule({"release_at": " ".join(errors.values())})


def _schedule(act: ReleaseAction, release_at: datetime) -> None:
    """Schedule the locked release at ``release_at``, refusing one that would stop then."""
    current = act.current
    _check_time(
        release_at, changed=release_at != current.release_at or current.status != RS.SCHEDULED
    )
    items = checks.item_rows([current.pk])[current.pk]
    if not items:
        raise InvalidTransition(f"“{current}” has no items yet: add posts to it first.")
    problem = checks.check_items(items, now=release_at, lock=False).problem
    if problem:
        raise NotPublishable([problem])
    reviewing.require_release_approved(current)
    moved = current.release_at not in (None, release_at)
    was = {"previous_release_at": current.release_at} if moved else {}
    act.change(status=RS.SCHEDULED, release_at=release_at, problem="")
    act.record(EV.SCHEDULED, release_at=release_at, **was)
    current.release_at = release_at
    # Never waits on the job's state row (its run may hold it): the run looks again itself.
    request_wakeup(PUBLISH_JOB, at=release_at, skip_locked=True)


def schedule_release(
    *, release: Release, release_at: datetime, user, expected_version: int | None = None
) -> Release:
    """Schedule (or reschedule) ``release`` to go out at ``release_at``.

    Every item must still apply: a release that would stop at its time is refused now.
    """
    require_permission(user, "schedule releases")
    with release_action(release, user=user, expected_version=expected_version) as act:
        act.require_pending("schedule")
        _schedule(act, release_at)
    release.refresh_from_db()
    return release


def edit_release(
    *,
    release: Release,
    name: str,
    release_at: datetime | None,
    user,
    expected_version: int | None = None,
) -> Release:
    """Rename ``release`` and move its time: a scheduled release is rescheduled (checked anew),
    a draft's time is only planned."""
    require_permission(user, "change releases")
    name = name.strip()[:200]
    if not name:
        raise InvalidTransition(_("A release needs a name."))
    with release_action(release, user=user, expected_version=expected_version) as act:
        act.require_pending("change")
        current = act.current
        if name != current.name:
            act.change(name=name)
            act.record(EV.RENAMED, name=name, previous_name=current.name)
            current.name = name
        if current.status == RS.SCHEDULED:
            if release_at is None:
                raise InvalidSchedule(
                    {"release_at": _("A scheduled release needs a time; unschedule it first.")}
                )
            if release_at != current.release_at:
                _schedule(act, release_at)
        elif release_at != current.release_at:
            if release_at is not None:
                _check_time(release_at)
            act.change(release_at=release_at)
            was = {"previous_release_at": current.release_at} if current.release_at else {}
            planned = {"release_at": release_at} if release_at is not None else {}
            act.record(EV.TIME_PLANNED, **planned, **was)
    release.refresh_from_db()
    return release


def unschedule_release(*, release: Release, user, expected_version: int | None = None) -> Release:
    """Take a scheduled release back to draft: it keeps its items and time but waits."""
    require_permission(user, "unschedule releases")
    with release_action(release, user=user, expected_version=expected_version) as act:
        if act.current.status != RS.SCHEDULED:
            raise InvalidTransition(
                f"“{act.current}” is {act.current.get_status_display()}, not scheduled."
            )
        act.change(status=RS.DRAFT, problem="")
        act.record(EV.UNSCHEDULED)
    release.refresh_from_db()
    return release


def cancel_release(*, release: Release, user, expected_version: int | None = None) -> Release:
    """Call ``release`` off: none of its items goes out, and its posts are free again."""
    require_permission(user, "cancel releases")
    with release_action(release, user=user, expected_version=expected_version) as act:
        act.require_pending("cancel")
        act.change(status=RS.CANCELLED, problem="")
        act.record(EV.CANCELLED)
    release.refresh_from_db()
    return release


def release_now(*, release: Release, user, expected_version: int | None = None) -> Release:
    """Send every item of ``release`` out at once, in one transaction, or none of them.

    Raises :class:`NotPublishable` naming the items that can no longer apply (nothing goes
    out), :class:`InvalidTransition` if a post is being changed by someone else right now.
    """
    require_permission(user, "release")
    with release_action(release, user=user, expected_version=expected_version) as act:
        act.require_pending("release")
        now = database_now()
        items = checks.item_rows([act.current.pk])[act.current.pk]
        if not items:
            raise InvalidTransition(f"“{act.current}” has no items yet: add posts to it first.")
        checked = checks.check_items(items, now=now, lock=True, release_id=act.current.pk)
        if checked.held:
            raise InvalidTransition(
                f"Someone is saving a post of “{act.current}” right now; try again in a moment."
            )
        if checked.problem:
            raise NotPublishable([checked.problem])
        reviewing.require_release_approved(act.current)
        held = go_live.why_not(go_live.RELEASE, [act.current.pk])
        if held:
            raise NotPublishable(list(held.values()))
        release_apply.apply(act.current, checked, now=now, planned=None, node="", user=user)
        act.current.refresh_from_db()
    release.refresh_from_db()
    return release
