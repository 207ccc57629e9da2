from django.apps import AppConfig


class JobsAppConfig(AppConfig):
    """Test-only app: jobs in the ``hatest`` group for multi-process scheduler tests."""

    name = "tests.jobsapp"
    label = "jobsapp"
    default_auto_field = "django.db.models.BigAutoField"
