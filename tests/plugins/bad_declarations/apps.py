from django.apps import AppConfig


class BadDeclarationsConfig(AppConfig):
    """Declares four jobs with bad schedules and one good job, ``bad_declarations.fine``."""

    name = "tests.plugins.bad_declarations"
    label = "bad_declarations"
