from django.apps import AppConfig


class PluginsConfig(AppConfig):
    """The plugin SDK, the plugin job admin and the built-in plugins."""

    name = "plugins"
    verbose_name = "Plugins"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from coordination.loop import runs_starting
        from plugins import checks, services

        checks.register()
        # Runs of a disabled plugin's jobs are refused once per tick (see the receiver).
        runs_starting.connect(
            services.refuse_runs_of_disabled_plugins, dispatch_uid="plugins.refuse_disabled"
        )
