from django.apps import AppConfig


class CoordinationConfig(AppConfig):
    """The scheduling engine: leader locks, job registry, loops, run ledger."""

    name = "coordination"
    verbose_name = "Scheduler"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from coordination import checks, registry

        checks.register()
        registry.autodiscover()
