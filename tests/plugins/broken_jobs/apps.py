from django.apps import AppConfig


class BrokenJobsConfig(AppConfig):
    """Its ``jobs.py`` declares a job with the engine's own API and a schedule that raises."""

    name = "tests.plugins.broken_jobs"
    label = "broken_jobs"
