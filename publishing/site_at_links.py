"""Shared links to the site at a moment: signed, expiring, ended by the preview revoke.

A link carries ``{"m": the moment, "e": expiry (Unix seconds), "d": the plan's digest}``
signed with the site's ``SECRET_KEY`` under its own salt, as preview links are
(:mod:`publishing.previews`). The digest names the posts the moment's changes touch and each
one's ``preview_generation``: revoking a post's preview links (which adds one to it) ends
every shared link whose moment shows a change of that post, as it ends the post's own preview
links; and a change scheduled, cancelled or moved since the link was made changes the set, so
the link stops showing a plan that is no longer the plan (the editor makes a new one).
Nothing is stored per link; anything wrong with one is the site's ordinary 404.
"""

import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.core import signing
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from coordination.clock import database_now
from publishing import previews
from publishing.actions import editor_name
from publishing.site_at import Change, other_changes
from publishing.site_at_facts import Touched, touched

logger = logging.getLogger(__name__)

SALT = "publishing.site-at"


@dataclass(frozen=True)
class SharedMoment:
    """What a valid signature vouches for: the moment, until when, and the plan's digest."""

    at: datetime
    expires_at: datetime
    digest: str


def plan_digest(touched_posts: Touched) -> str:
    """Return the digest of the posts a moment's changes touch and their preview generations."""
    text = ",".join(f"{pk}:{generation}" for pk, generation in sorted(touched_posts.generations))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def make_token(moment: SharedMoment) -> str:
    payload = {
        "m": int(moment.at.timestamp()),
        "e": int(moment.expires_at.timestamp()),
        "d": moment.digest,
    }
    return signing.dumps(payload, salt=SALT)


def read_token(token: str) -> SharedMoment | None:
    """Return what ``token`` claims, or None if it is not a shared moment this site signed."""
    try:
        payload = signing.loads(token, salt=SALT)
        return SharedMoment(
            at=datetime.fromtimestamp(int(payload["m"]), tz=UTC),
            expires_at=datetime.fromtimestamp(int(payload["e"]), tz=UTC),
            digest=str(payload["d"]),
        )
    except (signing.BadSignature, KeyError, TypeError, ValueError, OverflowError, OSError):
        return None


def shared_link(*, at: datetime, user, expires_in: timedelta) -> str:
    """Return the path of a link that shows the site at ``at`` to anyone holding it, until it
    expires ``expires_in`` from now (the database's time) or the plan changes."""
    if not previews.can_preview(user):
        raise PermissionDenied(
            f"{user.get_username() or 'This user'} may not share the site ahead: that needs "
            "the “Can change post” permission (publishing.change_post)."
        )
    previews.check_lifetime(expires_in)
    at = at.replace(microsecond=0)
    moment = SharedMoment(at, database_now() + expires_in, plan_digest(touched(at)))
    logger.info(
        "link to the site at %s made by %s, valid until %s",
        at.isoformat(),
        editor_name(user) or "the system",
        moment.expires_at.isoformat(),
    )
    return reverse("publishing:site_at_shared", kwargs={"token": make_token(moment)})


@dataclass(frozen=True)
class Showing:
    """A valid link's moment, with what checking it read, for its page to read no more: the
    database's time (``now``), other apps' changes by the moment (``others``) and how many
    changes there are by then (``count``)."""

    moment: SharedMoment
    now: datetime
    others: list[Change]
    count: int


def still_shown(token: str) -> Showing | None:
    """Return the moment ``token`` shows if it is still valid (signed, not expired, the plan
    unchanged and no preview revoked since); else None."""
    moment = read_token(token)
    if moment is None:
        return None
    now = database_now()
    if moment.expires_at <= now:
        return None
    others = other_changes(moment.at)
    touched_posts = touched(moment.at, others)
    if plan_digest(touched_posts) != moment.digest:
        return None
    return Showing(moment, now, others, touched_posts.count)
