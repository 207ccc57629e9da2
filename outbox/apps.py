from django.apps import AppConfig


class OutboxConfig(AppConfig):
    """Publish events delivered to subscribers through the engine's ledger."""

    name = "outbox"
    verbose_name = "Publish events"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from outbox import wakeups
        from publishing.public_events import events_committed

        events_committed.connect(wakeups.wake_dispatcher, dispatch_uid="outbox.wake_dispatcher")
