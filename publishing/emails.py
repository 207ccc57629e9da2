"""What publishing's emails share: links on the site's address, and each reader's time zone."""

from django.conf import settings as django_settings
from django.utils import timezone

from editors.models import EditorProfile
from editors.zones import zone_or_none


def absolute(path: str) -> str:
    """Return ``path`` on the site's address (``INSTATIC_SITE_URL``) when it is set."""
    base = getattr(django_settings, "INSTATIC_SITE_URL", "")
    return base.rstrip("/") + path if base else path


def zone_of(user):
    """Return ``user``'s own time zone, or the site's when they chose none."""
    profile = EditorProfile.objects.filter(user=user).first()
    zone = zone_or_none(profile.time_zone) if profile and profile.time_zone else None
    return zone or timezone.get_default_timezone()
