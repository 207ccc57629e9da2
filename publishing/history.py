"""Publish events' data: what the actions store, and the words the admin shows for it.

An event stores what happened as typed values in ``PublishEvent.data`` (times as ISO 8601 in
UTC), never as a sentence: a sentence written at the time would carry the writer's format and
zone forever. :func:`describe` says it in the viewer's time zone (the editors app activates
each editor's zone in the admin), to the second, wherever events are shown.

Keys (each optional; which ones an event has depends on its kind):

``publish_at``, ``unpublish_at``
    the planned time set by the event (``None``: cleared);
``previous_publish_at``, ``previous_unpublish_at``
    the time it replaced, when the event changed one (a reschedule);
``was_due_at``
    when a cancelled post or revision was due;
``by_hand``
    ``True`` for "publish now" and "unpublish now";
``revision``, ``revision_status``, ``note``
    the revision's number, the status it had, and why it was set aside;
``slug``, ``was``
    a deleted post's slug and status;
``error``
    why a publish failed;
``late_after``
    for a late post, the seconds past ``was_due_at`` after which it was told late;
``release``, ``release_name``
    the release the change went out with (or a revision was taken into);
``review``, ``target``, ``note``, ``reason``, ``comment``
    a review: its id, what was submitted (post or revision), the submitter's note, Instatic's
    reason when it submitted it again by itself, and the reviewer's comment.
"""

from datetime import UTC, datetime

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from coordination.wording import duration_text, local_time
from publishing.models import Post, PostRevision, PublishEvent

K = PublishEvent.Kind


def stored_time(value: datetime | None) -> str | None:
    """Return ``value`` as it is stored in event data: ISO 8601 in UTC (``None`` stays)."""
    if value is None:
        return None
    if timezone.is_naive(value):
        raise ValueError(f"event times must be aware datetimes, got {value!r}")
    return value.astimezone(UTC).isoformat()


def actor_name(event: PublishEvent) -> str:
    """Return who acted, as an editor reads it: the user's name, ``Scheduler (node vm:11206)``
    for the scheduler, or ``system``; never a bare node name."""
    if event.user_id is not None and event.user is not None:
        return event.user.get_username()
    if event.node:
        return _("Scheduler (node %(node)s)") % {"node": event.node}
    return _("system")


def stored_time_text(data: dict, key: str) -> str:
    """Return the time stored under ``key`` in the viewer's zone; ``none`` if cleared."""
    value = data.get(key)
    if value is None:
        return _("none")
    parsed = parse_datetime(value) if isinstance(value, str) else None
    return local_time(parsed) if parsed is not None else str(value)


def _change(data: dict, name: str, label: str) -> str | None:
    """Return ``label OLD → NEW`` for a time the event changed, or None if it did not."""
    if f"previous_{name}" not in data:
        return None
    return f"{label} {stored_time_text(data, f'previous_{name}')} → {stored_time_text(data, name)}"


def _status_label(choices, value: str) -> str:
    return str(dict(choices.choices).get(value, value)).lower()


def describe(event: PublishEvent) -> str:
    """Return the event's details in words, times in the current time zone to the second."""
    text = _describe(event)
    name = (event.data or {}).get("release_name")
    if not name:
        return text
    release = _("with the release “%(name)s”") % {"name": name}
    return f"{text}, {release}" if text else release


def _describe(event: PublishEvent) -> str:
    data = event.data or {}
    if not data and event.detail:
        return event.detail  # written before events had data, and not readable as data
    kind = event.kind
    parts: list[str] = []
    if kind == K.SCHEDULED:
        parts.append(_("publish at %(when)s") % {"when": stored_time_text(data, "publish_at")})
        if data.get("unpublish_at"):
            parts.append(
                _("unpublish at %(when)s") % {"when": stored_time_text(data, "unpublish_at")}
            )
        return ", ".join(parts)
    if kind == K.RESCHEDULED:
        changes = [
            _change(data, "publish_at", _("publish at")),
            _change(data, "unpublish_at", _("unpublish at")),
        ]
        return "; ".join(c for c in changes if c)
    if kind == K.CANCELLED:
        return _("was due at %(when)s") % {"when": stored_time_text(data, "was_due_at")}
    if kind in (K.PUBLISHED, K.UNPUBLISHED) and data.get("by_hand"):
        return _("published now") if kind == K.PUBLISHED else _("unpublished now")
    if kind == K.FAILED:
        return str(data.get("error", ""))
    if kind == K.LATE:
        return _("was due at %(when)s, still not live %(after)s later") % {
            "when": stored_time_text(data, "was_due_at"),
            "after": duration_text(data.get("late_after")),
        }
    if kind == K.DELETED:
        was = _status_label(Post.Status, data.get("was", ""))
        return _("slug %(slug)s, was %(was)s") % {"slug": data.get("slug", ""), "was": was}
    if kind == K.PREVIEWS_REVOKED:
        return _("every earlier preview link")
    if kind in (K.REVIEW_REQUESTED, K.REVIEW_APPROVED, K.REVIEW_REJECTED, K.REVIEW_RESET):
        return _describe_review(kind, data)
    if "revision" in data:
        return _describe_revision(kind, data)
    return event.detail


def _describe_review(kind: str, data: dict) -> str:
    what = (
        _("revision %(number)s") % {"number": data["revision"]}
        if data.get("revision")
        else _("this version")
    )
    said = data.get("comment") if kind in (K.REVIEW_APPROVED, K.REVIEW_REJECTED) else None
    said = said or data.get("note")
    if said:
        return f"{what}: “{said}”"
    # Instatic's own reason (a change after the approval) is not quoted as anyone's words.
    return f"{what}: {data['reason']}" if data.get("reason") else what


def _describe_revision(kind: str, data: dict) -> str:
    text = _("revision %(number)s") % {"number": data["revision"]}
    if kind == K.REVISION_SCHEDULED and data.get("release_name"):
        return text
    if kind == K.REVISION_SCHEDULED:
        return _("%(revision)s at %(when)s") % {
            "revision": text,
            "when": stored_time_text(data, "publish_at"),
        }
    status = data.get("revision_status")
    if status:
        said = [_status_label(PostRevision.Status, status)]
        if data.get("was_due_at"):
            said.append(_("was due at %(when)s") % {"when": stored_time_text(data, "was_due_at")})
        text += f" ({', '.join(said)})"
    if data.get("note"):
        text += f": {data['note']}"
    return text
