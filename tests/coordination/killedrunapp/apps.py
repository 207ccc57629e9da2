from django.apps import AppConfig


class KilledRunAppConfig(AppConfig):
    """Claim-first jobs that run until their node stops (added through INSTATIC_TEST_EXTRA_APPS)."""

    name = "tests.coordination.killedrunapp"
    label = "killedrunapp"
