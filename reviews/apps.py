from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ReviewsConfig(AppConfig):
    """Review before publish: nothing goes live that a reviewer has not approved as it is.

    An optional app: it attaches to publishing only through the extension points publishing
    defines (each registered in :mod:`reviews.wiring`), and publishing works without it.
    """

    name = "reviews"
    verbose_name = _("Reviews")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from reviews import wiring

        wiring.attach()
