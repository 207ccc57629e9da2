"""Every Instatic app's log lines reach the console at the operator's level, not only warnings."""

from pathlib import Path

from django.apps import apps
from django.conf import settings

ROOT = Path(settings.BASE_DIR).resolve()


def test_each_of_the_projects_own_apps_logs_at_the_configured_level():
    own = {
        config.name.split(".")[0]
        for config in apps.get_app_configs()
        if Path(config.path).resolve().parent == ROOT and not config.name.startswith("tests")
    }
    loggers = settings.LOGGING["loggers"]
    assert own - set(loggers) == set(), "give each app a logger in LOGGING, or its info is lost"
