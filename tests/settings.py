"""Settings for the test suite: the real settings with test-friendly defaults.

The database comes from ``DATABASE_URL`` exactly as in production; on SQLite the test
database is a file (not ``:memory:``) so real ``runscheduler`` processes can share it.
"""

import atexit
import os
import shutil
import tempfile

if "INSTATIC_TEST_TMP" not in os.environ:
    # The first process of a test run (pytest) makes one temporary folder for everything the
    # tests and the processes they start write (the SQLite file, logs, exports, browsers);
    # children inherit it through TMPDIR, and it is removed when that first process exits.
    _root = tempfile.mkdtemp(prefix="instatic-test-")
    # Traversable by the database servers' own users (initdb runs as postgres under root).
    os.chmod(_root, 0o755)
    os.environ["INSTATIC_TEST_TMP"] = os.environ["TMPDIR"] = tempfile.tempdir = _root
    atexit.register(shutil.rmtree, _root, True)

os.environ.setdefault(
    "DJANGO_SECRET_KEY", "instatic-test-suite-secret-key-not-for-production-use-0123456789"
)
os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
# The schedulers the tests start run no worker processes unless a test asks for them.
os.environ.setdefault("INSTATIC_WORKERS", "0")
os.environ.setdefault("INSTATIC_VAR_DIR", os.path.join(os.environ["INSTATIC_TEST_TMP"], "var"))

from instatic.settings import *  # noqa: E402,F403
from instatic.settings import DATABASES, VAR_DIR  # noqa: E402

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}

# Fast password hashing keeps admin tests quick; production keeps Django's default.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

INSTALLED_APPS = [*INSTALLED_APPS, "tests.jobsapp"]  # noqa: F405
# The test database's flush, quicker than Django's (tests/testdatabase/management/commands).
INSTALLED_APPS += ["tests.testdatabase"]
# The example plugin (docs/plugins.md), and test-only plugin apps a multi-process test adds to
# one node through the environment (a node with a different declared job set; a hanging job).
INSTALLED_APPS += ["plugins.contrib.example"]
INSTALLED_APPS += [a for a in os.environ.get("INSTATIC_TEST_EXTRA_APPS", "").split(",") if a]
# Optional apps left out, to show publishing works without them
# (tests/instatic/test_optional_apps.py).
_WITHOUT = {a for a in os.environ.get("INSTATIC_TEST_WITHOUT_APPS", "").split(",") if a}
INSTALLED_APPS = [a for a in INSTALLED_APPS if a not in _WITHOUT]
HATEST_WORK_SECONDS = float(os.environ.get("HATEST_WORK_SECONDS", "0.05"))
HATEST_SLOW_SECONDS = float(os.environ.get("HATEST_SLOW_SECONDS", "1.5"))
HATEST_FAIL = os.environ.get("HATEST_FAIL", "") == "1"

# WhiteNoise warns when STATIC_ROOT is missing; tests serve no collected files.
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
