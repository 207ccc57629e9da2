"""Test settings whose database an operator might misconfigure, for ``manage.py check`` runs.

``INSTATIC_CHECKS_DATABASE`` picks it: ``memory`` (an in-memory SQLite database, which the
settings' ``DATABASE_URL`` parsing refuses, so only a hand-written ``DATABASES`` gets there) or
``unsupported`` (a backend whose vendor the leader lock does not know).
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASES, VAR_DIR

_CHOICE = os.environ.get("INSTATIC_CHECKS_DATABASE", "")
if _CHOICE == "memory":
    DATABASES["default"] = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
elif _CHOICE == "unsupported":
    DATABASES["default"] = {
        "ENGINE": "tests.coordination.unsupported_backend",
        "NAME": str(VAR_DIR / "unsupported.sqlite3"),
    }

if os.environ.get("INSTATIC_CHECKS_TASKS") == "no-runs-queue":
    # An operator's own TASKS whose backend takes only the "default" queue.
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
