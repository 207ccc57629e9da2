from django.apps import AppConfig


class ExtraPluginConfig(AppConfig):
    """Declares ``extra.ping``: a node with this app declares one job more than the others."""

    name = "tests.plugins.extra_plugin"
    label = "extra"
