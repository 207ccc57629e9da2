"""Preview links: signed, expiring, revocable addresses of a post's next version.

A link carries ``{"p": post id, "g": preview generation, "e": expiry (Unix seconds)}`` signed
with the site's ``SECRET_KEY`` under its own salt (:data:`SALT`), so a token made for anything
else in Django (a session, a password reset) is not a preview link, and changing a single
character makes it invalid. Nothing is stored per link. Revocation is per post: the post's
``preview_generation`` is part of the signed payload, and :func:`revoke_preview_links` adds
one to it, which turns every link given out before into a 404. Expiry is checked against the
database clock, like every other time.

The payload is signed, not encrypted: it reveals the post's id and the expiry to whoever holds
the link, which shows the post anyway.
"""

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.core import signing
from django.core.exceptions import PermissionDenied
from django.db.models import F
from django.urls import reverse

from coordination.clock import database_now
from publishing.actions import editor_action, editor_name
from publishing.models import Post, PublishEvent

logger = logging.getLogger(__name__)

SALT = "publishing.preview"
#: Headers of a preview: no search engine indexes it, no shared cache keeps it, and no link in
#: it tells another site the preview's address (the link is the key).
PREVIEW_HEADERS = {
    "X-Robots-Tag": "noindex, nofollow",
    "Cache-Control": "private, no-store, max-age=0",
    "Referrer-Policy": "no-referrer",
}
#: The longest a link may work: a shared link should not outlive the work it shows for long.
MAX_LIFETIME = timedelta(days=30)


@dataclass(frozen=True)
class PreviewClaim:
    """What a valid signature vouches for; whether it still holds is the view's question."""

    post_id: int
    generation: int
    expires_at: datetime


def check_lifetime(expires_in: timedelta) -> None:
    """Raise ValueError for a lifetime that is not positive or is longer than allowed."""
    if not timedelta(0) < expires_in <= MAX_LIFETIME:
        raise ValueError(
            f"expires_in must be more than 0 and at most {MAX_LIFETIME.days} days, got {expires_in}"
        )


def make_token(*, post_id: int, generation: int, expires_at: datetime) -> str:
    """Return the signed token of a preview link."""
    payload = {"p": post_id, "g": generation, "e": int(expires_at.timestamp())}
    return signing.dumps(payload, salt=SALT)


def read_token(token: str) -> PreviewClaim | None:
    """Return what ``token`` claims, or None if it is not a preview link this site signed."""
    try:
        payload = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    try:
        return PreviewClaim(
            post_id=int(payload["p"]),
            generation=int(payload["g"]),
            expires_at=datetime.fromtimestamp(int(payload["e"]), tz=UTC),
        )
    except (KeyError, TypeError, ValueError, OverflowError, OSError):
        return None


def can_preview(user) -> bool:
    """Return True if ``user`` may hand out (and revoke) preview links: editors of posts."""
    return user is None or user.has_perm("publishing.change_post")


def _require_preview_permission(user, action: str) -> None:
    if not can_preview(user):
        raise PermissionDenied(
            f"{user.get_username() or 'This user'} may not {action}: that needs the "
            "“Can change post” permission (publishing.change_post)."
        )


def preview_url(*, post: Post, user, expires_in: timedelta, now: datetime | None = None) -> str:
    """Return the path of a signed link that shows ``post``'s next version until it expires.

    Anyone with the link sees the newest pending revision (draft or scheduled) or else the
    post as it is, marked as a preview. The link expires ``expires_in`` after ``now`` (the
    database's time) and dies with :func:`revoke_preview_links`.
    """
    _require_preview_permission(user, "share previews")
    check_lifetime(expires_in)
    now = database_now() if now is None else now
    generation = Post.objects.values_list("preview_generation", flat=True).get(pk=post.pk)
    token = make_token(post_id=post.pk, generation=generation, expires_at=now + expires_in)
    logger.info(
        "preview link for post %s made by %s, valid until %s",
        post.pk,
        editor_name(user) or "the system",
        (now + expires_in).isoformat(),
    )
    return reverse("publishing:preview", kwargs={"token": token})


def revoke_preview_links(*, post: Post, user, expected_version: int | None = None) -> Post:
    """Make every preview link of ``post`` given out so far a 404."""
    _require_preview_permission(user, "revoke previews")
    with editor_action(post, user=user, expected_version=expected_version) as action:
        action.change(
            PublishEvent.Kind.PREVIEWS_REVOKED,
            public=False,
            preview_generation=F("preview_generation") + 1,
        )
    post.refresh_from_db()
    return post
