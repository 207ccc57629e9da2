"""A release's history: each step written where it happens, and said in the reader's words.

Every release action (:mod:`releases.actions`), a stop (:mod:`releases.stopping`)
and going out (:mod:`releases.apply`) call :func:`record` in the transaction that
makes the step, so the history holds exactly what happened. Its data are typed values, as a
post's events are (:mod:`publishing.history`); :func:`describe` says them in the reader's
zone, so a colleague in Tokyo and one in Berlin each read their own time.

Keys (each optional; which ones a step has depends on its kind):

``release_at``, ``previous_release_at``
    the time the step set, and the one it replaced;
``name``, ``previous_name``
    a rename;
``title``, ``action``
    the post an item step is about, and what the release does to it;
``problem``
    why the release stopped, went back to review, or was unscheduled by Instatic;
``planned``, ``late``
    when a release that went out was due, and the seconds it went out after that;
``by_hand``
    ``True`` for "Release now";
``published``, ``revisions``, ``taken_down``
    how many posts each kind of change went out to.
"""

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from coordination.wording import duration_text
from publishing.history import stored_time, stored_time_text
from releases.models import ItemAction, ReleaseEvent

K = ReleaseEvent.Kind


def record(release_id: int, kind: str, *, by: str = "", **data) -> ReleaseEvent:
    """Write one step of the release (times in ``data`` as aware datetimes)."""
    values = {
        key: stored_time(value) if hasattr(value, "tzinfo") else value
        for key, value in data.items()
    }
    return ReleaseEvent.objects.create(release_id=release_id, kind=kind, by=by[:200], data=values)


def describe(event: ReleaseEvent) -> str:
    """Return the step's details in words, times in the current time zone."""
    data = event.data or {}
    kind = event.kind
    if kind in (K.CREATED, K.TIME_PLANNED, K.SCHEDULED):
        return _time_change(data)
    if kind == K.RENAMED:
        return _("“%(was)s” → “%(name)s”") % {
            "was": data.get("previous_name", ""),
            "name": data.get("name", ""),
        }
    if kind in (K.ITEM_ADDED, K.ITEM_REMOVED, K.ITEM_REFRESHED):
        return _item(kind, data)
    if kind in (K.STOPPED, K.UNSCHEDULED, K.SENT_TO_REVIEW):
        return str(data.get("problem", ""))
    if kind == K.RELEASED:
        return _released(data)
    return ""


def _time_change(data: dict) -> str:
    if "release_at" not in data:
        if "previous_release_at" in data:
            return _("no time planned (was %(was)s)") % {
                "was": stored_time_text(data, "previous_release_at")
            }
        return ""
    if "previous_release_at" in data:
        return _("goes out at %(was)s → %(when)s") % {
            "was": stored_time_text(data, "previous_release_at"),
            "when": stored_time_text(data, "release_at"),
        }
    return _("goes out at %(when)s") % {"when": stored_time_text(data, "release_at")}


def _item(kind: str, data: dict) -> str:
    title = data.get("title", "")
    action = dict(ItemAction.choices).get(data.get("action", ""), "")
    if kind == K.ITEM_REFRESHED:
        return _("“%(title)s”: goes out as it is now") % {"title": title}
    if action:
        return f"“{title}”: {str(action).lower()}"
    return f"“{title}”"


def _released(data: dict) -> str:
    published, revised, down = (
        data.get(key, 0) for key in ("published", "revisions", "taken_down")
    )
    counts = []
    if published:
        counts.append(
            ngettext("%(n)d post published", "%(n)d posts published", published) % {"n": published}
        )
    if revised:
        counts.append(
            ngettext("%(n)d revision put live", "%(n)d revisions put live", revised)
            % {"n": revised}
        )
    if down:
        counts.append(
            ngettext("%(n)d post taken down", "%(n)d posts taken down", down) % {"n": down}
        )
    text = ", ".join(counts)
    if data.get("by_hand"):
        return _("released now: %(what)s") % {"what": text} if text else _("released now")
    when = _("was due at %(when)s") % {"when": stored_time_text(data, "planned")}
    if data.get("late"):
        when += ", " + _("went out %(after)s later") % {"after": duration_text(data["late"])}
    return f"{text}; {when}" if text else when
