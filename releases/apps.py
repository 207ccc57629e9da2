from django.apps import AppConfig, apps
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _


class ReleasesConfig(AppConfig):
    """Releases: several changes of posts that go live together, at one instant.

    An optional app: it attaches to publishing only through the extension points publishing
    defines (each registered here), and publishing works without it.
    """

    name = "releases"
    verbose_name = _("Releases")
    default_auto_field = "django.db.models.BigAutoField"

    def import_models(self):
        # Checked before anything imports the app's modules (the admin's discovery does,
        # before ready()): a release's review is a review subject, so releases build on
        # the reviews app.
        if not apps.is_installed("reviews"):
            raise ImproperlyConfigured(
                'The releases app needs the reviews app: add "reviews" to INSTALLED_APPS '
                '(before "releases"), or leave both out.'
            )
        super().import_models()

    def ready(self):
        from releases import wiring

        wiring.attach()
