"""Fixtures for the plugin tests: admin users with and without the control permission."""

import pytest
from django.contrib.auth.models import Permission, User


def _staff(username: str, codenames: list[str]) -> User:
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="plugins", codename__in=codenames)
    )
    return User.objects.get(pk=user.pk)  # fresh instance: no stale permission cache


VIEW = [
    "view_pluginstate",
    "view_pluginjob",
    "view_groupjob",
    "view_pluginrun",
    "view_controlevent",
]


@pytest.fixture
def operator(db) -> User:
    """A staff user who may see and control plugins and their jobs."""
    return _staff("operator", [*VIEW, "control_plugins"])


@pytest.fixture
def viewer(db) -> User:
    """A staff user who may look at plugins and their jobs but not control them."""
    return _staff("viewer", VIEW)


@pytest.fixture
def operator_client(client, operator):
    client.force_login(operator)
    return client
