"""Activate each editor's own time zone for their admin requests."""

from django.urls import reverse
from django.utils import timezone

from editors.models import EditorProfile
from editors.zones import zone_or_none


class EditorTimeZoneMiddleware:
    """Use the signed-in user's ``EditorProfile.time_zone`` for requests under the admin.

    Only the admin: the public site and its caches (ETag, Last-Modified) must look the same to
    everyone. Needs ``AuthenticationMiddleware`` before it (system check ``editors.E001``).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        zone = self._zone(request)
        if zone is None:
            return self.get_response(request)
        timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()

    def _zone(self, request):
        if not request.path_info.startswith(reverse("admin:index")):
            return None
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        name = (
            EditorProfile.objects.filter(user_id=user.pk)
            .values_list("time_zone", flat=True)
            .first()
        )
        return zone_or_none(name or "")
