"""The editors tests sign in as the publishing tests' staff users."""

from tests.publishing.conftest import drafter, editor  # noqa: F401 - fixtures, used by name
