from django.apps import AppConfig


class EditorsConfig(AppConfig):
    """Per-editor preferences for the admin: today, the time zone each editor works in."""

    name = "editors"
    verbose_name = "Editors"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from editors import checks

        checks.register()
