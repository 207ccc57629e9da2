from django.apps import AppConfig


class MisbehavingPluginConfig(AppConfig):
    """Declares ``misbehaving.hang``: runs far past its max duration, ignoring should_stop()."""

    name = "tests.plugins.misbehaving"
    label = "misbehaving"
