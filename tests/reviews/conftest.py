"""The publishing tests' fixtures and helpers (editors, posts, the publish job), which the
reviews app's tests use as publishing's own do."""

from tests.publishing.conftest import *  # noqa: F401, F403
