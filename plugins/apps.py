from django.apps import AppConfig


class PluginsConfig(AppConfig):
    """The plugin SDK, the plugin job admin and the built-in plugins."""

    name = "plugins"
    verbose_name = "Plugins"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from plugins import checks

        checks.register()
