from django.apps import AppConfig


class StubbornAppConfig(AppConfig):
    """A job on workers that ignores ``should_stop()`` (added through INSTATIC_TEST_EXTRA_APPS)."""

    name = "tests.coordination.stubbornapp"
    label = "stubbornapp"
