from django.apps import AppConfig


class OutboxConfig(AppConfig):
    """Publish events delivered to subscribers through the engine's ledger."""

    name = "outbox"
    verbose_name = "Publish events"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks as django_checks

        from editors.sections import add_notifications_section
        from outbox import checks, wakeups
        from outbox.post_section import deliveries_section
        from outbox.watching import watch_tool, watched_section
        from publishing.admin.sections import add_post_section, add_post_tool
        from publishing.public_events import events_committed

        django_checks.register(checks.check_webhook_timings, django_checks.Tags.compatibility)
        events_committed.connect(wakeups.wake_dispatcher, dispatch_uid="outbox.wake_dispatcher")
        add_post_section(deliveries_section)
        add_post_tool(watch_tool)
        add_notifications_section(watched_section)
