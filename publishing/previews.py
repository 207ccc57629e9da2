"""Preview links: signed, expiring, revocable addresses of a post's next version.

A link carries ``{"p": post id, "g": preview generation, "e": expiry (Unix seconds)}`` signed
with the site's ``SECRET_KEY`` under its own salt (:data:`SALT`), so a token made for anything
else in Django (a session, a password reset) is not a preview link, and changing a single
character makes it invalid. Nothing is stored per link. Revocation is per post: the post's
``preview_generation`` is part of the signed payload, and
:func:`publishing.services.revoke_preview_links` adds one to it, which turns every link given
out before into a 404. Expiry is checked against the database clock, like every other time.

The payload is signed, not encrypted: it reveals the post's id and the expiry to whoever holds
the link, which shows the post anyway.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.core import signing

SALT = "publishing.preview"
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
