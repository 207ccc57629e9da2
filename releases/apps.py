from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ReleasesConfig(AppConfig):
    """Releases: several changes of posts that go live together, at one instant.

    An optional app: it attaches to publishing only through the extension points publishing
    defines (each registered here), and publishing works without it.
    """

    name = "releases"
    verbose_name = _("Releases")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from releases import wiring

        wiring.attach()
