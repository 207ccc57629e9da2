from django.apps import AppConfig


class ExamplePluginConfig(AppConfig):
    """An example plugin: a heartbeat every second and a daily digest of the live posts.

    Add ``"plugins.contrib.example"`` to ``INSTALLED_APPS`` to run it; its jobs are then named
    ``example.beat`` and ``example.digest``.
    """

    name = "plugins.contrib.example"
    label = "example"
    verbose_name = "Example plugin"
    default_auto_field = "django.db.models.BigAutoField"
