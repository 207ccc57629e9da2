"""How an editor action changes a post: one code path for the lock, the change, its event and
the wake-up, which :mod:`publishing.posts`, :mod:`publishing.revisions` and
:mod:`publishing.previews` all take.

An action locks the post's row (:func:`editor_action`), checks the state it starts from, makes
a *conditional* change (``UPDATE ... WHERE version = <locked version>``), writes its
:class:`PublishEvent` and wakes the publish job when the change brings work sooner, all in one
transaction (:meth:`EditorAction.change`). Every write adds one to the post's ``version`` and
records who made it (``updated_by``). An action given ``expected_version`` (the admin always
gives the version its form was loaded with) compares it with the row's version under the row
lock and raises :class:`EditConflict` when someone else changed the post meanwhile, so a stale
tab can neither undo a colleague's status change nor overwrite their text. Callers that give
no version (the job, scripts) act on the current row.

``user`` is the person acting; ``None`` means the system (the publish job, scripts, tests).

The helper is a context manager and one method, not a class per action (Wagtail's action
objects): the actions differ in their checks and in what else they write under the lock (a
revision, its baseline), which reads best as straight code inside the ``with`` block, and
classes would add a class beside each of the keyword-only functions the admin, the tools and
the tests call. What the actions share, and what must happen in the same order every time,
is here once.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F, Max
from django.db.models.functions import Now

from coordination.services import request_wakeup
from coordination.wording import scheduler_text
from publishing import hooks
from publishing.exceptions import EditConflict, InvalidTransition
from publishing.job_names import PUBLISH_JOB
from publishing.models import Post, PublishEvent
from publishing.public_events import OUTBOX_KINDS, announce_events

PUBLISH_PERMISSION = "publishing.publish_post"


def can_publish(user) -> bool:
    """Return True if ``user`` may schedule, publish and unpublish posts (None: the system)."""
    return user is None or user.has_perm(PUBLISH_PERMISSION)


def require_permission(user, action: str) -> None:
    """Raise PermissionDenied, naming ``action``, unless ``user`` may publish."""
    if not can_publish(user):
        raise PermissionDenied(
            f"{user.get_username() or 'This user'} may not {action}: that needs the "
            "“Can schedule and publish posts” permission (publishing.publish_post)."
        )


def user_or_none(user):
    """Return ``user`` if it is a stored user, else None (the system, an unsaved user)."""
    return user if user is not None and getattr(user, "pk", None) is not None else None


def editor_name(user) -> str:
    """Return the name recorded as a post's last editor (empty for the system)."""
    return user.get_username() if user_or_none(user) is not None else ""


def person_name(recorded: str) -> str:
    """Return how the editor recorded as ``recorded`` (a post's ``updated_by``) is named to a
    colleague: the full name of their account when it has one, else the name as recorded (a
    username, or the scheduler's ``Scheduler (node ...)``); empty for the system."""
    if not recorded:
        return ""
    User = get_user_model()
    user = User._default_manager.filter(**{User.USERNAME_FIELD: recorded}).first()
    full = user.get_full_name().strip() if user is not None else ""
    return full or recorded


def scheduler_name(node: str) -> str:
    """Return how the scheduler of ``node`` is named as a post's editor (``updated_by``)."""
    return (scheduler_text(node) if node else "Scheduler")[:200]


def edit_conflict(current: Post, expected_version: int | None) -> EditConflict | None:
    """Return the conflict of an edit made against ``expected_version`` of ``current``, if any.

    ``None`` as the expected version means "whatever is there now" (jobs, scripts). The admin's
    form calls this too, to show the conflict before saving; the actions call it under the
    row lock, which is what makes it hold.
    """
    if expected_version is None or expected_version == current.version:
        return None
    # Scheduling a revision or revoking preview links changes the version but not
    # updated_at (the public pages' Last-Modified); their events say when they happened.
    last_event = PublishEvent.objects.filter(post=current).aggregate(at=Max("at"))["at"]
    changed_at = max(filter(None, [current.updated_at, last_event]))
    return EditConflict(
        title=str(current),
        changed_by=person_name(current.updated_by),
        changed_at=changed_at,
        status_label=current.get_status_display(),
        version=current.version,
    )


def record_event(post: Post, kind: str, *, user=None, data=None) -> PublishEvent:
    """Record a publish event; ``data`` holds its typed details (see :mod:`publishing.history`).

    Call it after the change of ``post`` (still the locked row as read): an event of a public
    change records the version the change wrote.
    """
    data = dict(data or {})
    if kind in OUTBOX_KINDS:
        data["version"] = post.version + 1  # the version the change (made under lock) wrote
    event = PublishEvent.objects.create(
        post=post, kind=kind, user=user_or_none(user), node="", data=data, lateness=None
    )
    if kind in OUTBOX_KINDS:
        announce_events()
    return event


@dataclass
class EditorAction:
    """One editor action on a post whose row is locked: ``current`` is that row."""

    current: Post
    user: Any
    changed: bool = False

    def change(
        self,
        kind: str | None = None,
        *,
        data: dict | None = None,
        wake_at: datetime | None = None,
        public: bool = True,
        **values,
    ) -> None:
        """Set ``values`` on the post, record the event ``kind`` and wake the publish job.

        The ``UPDATE`` holds only while the post's version (and, for a ``public`` change, its
        status) is the locked one. A public change moves ``updated_at``, the public pages'
        Last-Modified; scheduling, cancelling and restoring revisions and revoking preview
        links are planned or private changes (``public=False``): they move the version, so a
        stale form is refused, but not the pages' Last-Modified. ``kind`` (when given) is the
        event the change writes, with ``data``; ``wake_at`` (when given) is when the publish
        job has work because of it.
        """
        current = self.current
        filters = {"status": current.status} if public else {}
        moves = {"updated_at": Now()} if public else {}
        updated = Post.objects.filter(pk=current.pk, **filters, version=current.version).update(
            **moves, updated_by=editor_name(self.user), version=F("version") + 1, **values
        )
        if not updated:
            # Unreachable while the row lock is held; kept so a change can never be blind.
            raise InvalidTransition(f"“{current}” changed while being saved; reload and try again.")
        self.changed = True
        if kind is not None:
            record_event(current, kind, user=self.user, data=data)
        if wake_at is not None:
            request_wakeup(PUBLISH_JOB, at=wake_at)


def lock(post: Post, expected_version: int | None = None) -> Post:
    """Return the post's current row, locked until the transaction ends.

    Raise :class:`EditConflict` if its version is not ``expected_version`` (when given).
    """
    current = Post.objects.select_for_update().get(pk=post.pk)
    conflict = edit_conflict(current, expected_version)
    if conflict is not None:
        raise conflict
    return current


@contextmanager
def editor_action(post: Post, *, user, expected_version: int | None) -> Iterator[EditorAction]:
    """Open a transaction, lock ``post``'s row (see :func:`lock`) and yield the action on it.

    A change is told to the post-changed receivers in the same transaction
    (:mod:`publishing.hooks`): a scheduled release holding the post stops, for one.
    """
    with transaction.atomic():
        action = EditorAction(current=lock(post, expected_version), user=user)
        yield action
        if action.changed:
            hooks.post_changed([action.current.pk], user=user)
