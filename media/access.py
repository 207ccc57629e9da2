"""Who may see an image now: the embargo, decided from the database at every request.

An image is public while a live post shows it: its live text points at the image or it is
the post's featured image. "Live" is ``publishing.selectors.live_posts()``, the rule the
public pages use, evaluated with the database's clock in the same query, so an image becomes
public in the instant its post does (by the publish job, a release, "Publish now") on every
replica at once, and stops being public when the last live post showing it goes.
"""

from django.core import signing
from django.db.models import Q

from media import rules
from media.models import FeaturedImage, Image, ImageUse
from publishing import selectors

PREVIEW_SALT = "media.preview"


def is_public(image: Image) -> bool:
    """Return True if a live post shows ``image`` (one query)."""
    in_text = Q(
        pk__in=ImageUse.objects.filter(image=image).values("post_id"),
        body_html__contains=rules.public_path(image.key, ""),
    )
    featured = Q(pk__in=FeaturedImage.objects.filter(image=image).values("post_id"))
    return selectors.live_posts().filter(in_text | featured).exists()


def is_editor(user) -> bool:
    """Return True if ``user`` may see every image (an editor of posts)."""
    return bool(
        user.is_authenticated
        and user.is_active
        and user.is_staff
        and user.has_perm("publishing.view_post")
    )


def may_upload(user) -> bool:
    """Return True if ``user`` may upload images and choose featured ones."""
    return bool(user.is_active and user.is_staff and user.has_perm("publishing.change_post"))


def preview_token(key: str, *, expires_at) -> str:
    """Return a token letting a preview link's reader see image ``key`` until ``expires_at``."""
    return signing.dumps([key, int(expires_at.timestamp())], salt=PREVIEW_SALT, compress=False)


def preview_allows(token: str, key: str, *, now) -> bool:
    """Return True if ``token`` was made by :func:`preview_token` for ``key`` and is unexpired."""
    if not token or len(token) > 200:
        return False
    try:
        signed_key, until = signing.loads(token, salt=PREVIEW_SALT)
    except (signing.BadSignature, ValueError, TypeError):
        return False
    return signed_key == key and isinstance(until, int) and now.timestamp() < until
