from django.apps import AppConfig


class PluginsConfig(AppConfig):
    name = "plugins"
    default_auto_field = "django.db.models.BigAutoField"
