from django.apps import AppConfig


class UnplannablePluginConfig(AppConfig):
    """Declares ``unplannable.broken`` (planning it raises) and ``unplannable.steady``."""

    name = "tests.plugins.unplannable"
    label = "unplannable"
