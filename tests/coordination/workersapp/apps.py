from django.apps import AppConfig


class WorkersAppConfig(AppConfig):
    """Jobs that run on worker processes (added through INSTATIC_TEST_EXTRA_APPS)."""

    name = "tests.coordination.workersapp"
    label = "workersapp"
