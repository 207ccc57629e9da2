"""Tell a release's owner, by email, that it stopped and why (in the owner's time zone).

Sent after the commit that stopped the release (:func:`releases.stopping.stop` makes that
change once, under a condition, on whichever replica finds the problem), so it is sent at most
once: a process that dies between the commit and the send tells nobody, and the release's
page, the release list and the calendar still show the problem.
"""

import logging
import threading

from django.core.mail import send_mail
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from coordination.wording import local_time
from publishing.emails import absolute, zone_of
from releases.models import Release

logger = logging.getLogger(__name__)


def words(release: Release) -> tuple[str, str]:
    """Return the email's subject and body for stopped ``release``, in the active zone."""
    when = local_time(release.release_at) if release.release_at else _("its time")
    subject = _("Release “%(name)s” is stopped") % {"name": release.name}
    url = absolute(reverse("admin:releases_release_change", args=[release.pk]))
    body = "\n\n".join(
        [
            _("Your release “%(name)s”, due at %(when)s, will not go out until this is resolved:")
            % {"name": release.name, "when": when},
            release.problem,
            _(
                "Nothing of it has gone out. Refresh or remove the items named above on the "
                "release's page: %(url)s"
            )
            % {"url": url},
        ]
    )
    return subject, body + "\n"


def tell_owner_soon(release_id: int) -> None:
    """Email the owner on a thread of its own (its own database connection, closed after)."""

    def tell() -> None:
        try:
            tell_owner(release_id)
        finally:
            connection.close()

    threading.Thread(target=tell, name=f"release-alert-{release_id}", daemon=True).start()


def tell_owner(release_id: int) -> bool:
    """Email the owner of stopped release ``release_id``; return True if an email was sent."""
    release = Release.objects.select_related("owner").filter(pk=release_id).first()
    owner = release.owner if release is not None else None
    if release is None or not release.problem or owner is None:
        return False
    if not owner.is_active or not owner.email:
        return False
    with timezone.override(zone_of(owner)):
        subject, body = words(release)
    try:
        send_mail(subject, body, None, [owner.email])
    except Exception:
        logger.exception("could not email %s that release %s is stopped", owner, release_id)
        return False
    return True
