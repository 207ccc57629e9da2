from django.apps import AppConfig


class ChaosAppConfig(AppConfig):
    """Test-only plugin jobs for the chaos soak (added through INSTATIC_TEST_EXTRA_APPS)."""

    name = "tests.chaosapp"
    label = "chaosapp"
