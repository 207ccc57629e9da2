from django.apps import AppConfig


class FencedCommitAppConfig(AppConfig):
    """A transactional job of its own group (added through INSTATIC_TEST_EXTRA_APPS)."""

    name = "tests.coordination.fencedcommitapp"
    label = "fencedcommitapp"
