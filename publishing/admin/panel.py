"""The post page's publishing panel: where the post is, in words, and what an editor can do.

:func:`state_text` decides the sentence from the post's values and the database's now
(a pure function, tested with a table); :func:`outcome_text` says what an action did, for
the message after it. The buttons themselves are the post form's ``target_status`` field
(:class:`publishing.forms.PublishingActionsWidget`); the admin carries them out through
:mod:`publishing.posts`.
"""

from dataclasses import dataclass
from datetime import datetime, tzinfo

from django.utils.translation import gettext as _

from publishing.models import Post
from publishing.words import moment_text, relative_text

S = Post.Status


@dataclass(frozen=True)
class PostState:
    """What the panel needs to know of a post (``taken_down_at``: its last unpublish)."""

    status: str
    publish_at: datetime | None = None
    unpublish_at: datetime | None = None
    published_at: datetime | None = None
    taken_down_at: datetime | None = None
    error: str = ""

    @classmethod
    def of(cls, post: Post, taken_down_at: datetime | None = None) -> "PostState":
        return cls(
            status=post.status,
            publish_at=post.publish_at,
            unpublish_at=post.unpublish_at,
            published_at=post.published_at,
            taken_down_at=taken_down_at,
            error=post.last_error,
        )


def is_late(status: str, publish_at: datetime | None, now: datetime) -> bool:
    """Return True for a scheduled post whose publish time has come and that is not live."""
    return status == S.SCHEDULED and publish_at is not None and publish_at <= now


def _at(value: datetime, zone: tzinfo, now: datetime) -> str:
    return moment_text(value, zone, now)


def _comes_down(state: PostState, zone: tzinfo, now: datetime) -> str:
    if state.unpublish_at is None:
        return ""
    return _("; comes down %(when)s, %(relative)s") % {
        "when": _at(state.unpublish_at, zone, now),
        "relative": relative_text(state.unpublish_at, now),
    }


def state_text(state: PostState, *, zone: tzinfo, now: datetime) -> str:
    """Return where the post is in words, times in ``zone`` with its name.

    ``Scheduled: goes live Tue 2 Dec, 05:01 JST, in 3 h 12 min``, ``Live since …``,
    ``Draft``, ``Taken down on …``, and for a scheduled post whose time has passed ``Late:
    was due … the scheduler has not published it yet`` (or why it could not).
    """
    if state.status == S.SCHEDULED and state.publish_at is not None:
        when = _at(state.publish_at, zone, now)
        relative = relative_text(state.publish_at, now)
        if state.error:
            return _(
                "Late: was due %(when)s (%(relative)s); the scheduler could not publish it: "
                "%(error)s. Fix the post and save it, and the scheduler tries again."
            ) % {"when": when, "relative": relative, "error": state.error}
        if is_late(state.status, state.publish_at, now):
            return _(
                "Late: was due %(when)s (%(relative)s); the scheduler has not published it yet"
            ) % {"when": when, "relative": relative}
        return _("Scheduled: goes live %(when)s, %(relative)s") % {
            "when": when,
            "relative": relative,
        } + _comes_down(state, zone, now)
    if state.status == S.PUBLISHED:
        if state.published_at is None:
            return _("Live") + _comes_down(state, zone, now)
        return _("Live since %(when)s") % {
            "when": _at(state.published_at, zone, now)
        } + _comes_down(state, zone, now)
    if state.status == S.UNPUBLISHED:
        if state.taken_down_at is None:
            return _("Taken down; the public does not see it")
        return _("Taken down on %(when)s; the public does not see it") % {
            "when": _at(state.taken_down_at, zone, now)
        }
    return _("Draft: the public does not see it")


def outcome_text(title: str, state: PostState, *, zone: tzinfo, now: datetime) -> str:
    """Return the message after an action: what the post is now, and when it goes out."""
    return _("“%(title)s”: %(state)s.") % {
        "title": title,
        "state": state_text(state, zone=zone, now=now),
    }


def saved_text(title: str) -> str:
    """Say that ``title``'s changes were saved (what other apps did follows)."""
    return _("Your changes to “%(title)s” were saved.") % {"title": title}


def not_done_text(title: str, why: str) -> str:
    """Return the message after a save whose publishing action was refused: the text was
    saved, the action was not."""
    return _("Your changes to “%(title)s” were saved, but nothing else was done: %(why)s") % {
        "title": title,
        "why": why,
    }
