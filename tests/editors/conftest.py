"""The editors tests sign in as the publishing tests' staff users."""

from tests.publishing.conftest import editor  # noqa: F401 - a fixture, used by name
