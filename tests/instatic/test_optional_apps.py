"""Publishing works with its optional apps left out of ``INSTALLED_APPS``.

Reviews, releases and the outbox attach to publishing only through the extension points
publishing defines, so a site without them migrates, publishes, edits, deletes and shows its
admin as before. Releases build on reviews: leaving reviews out means leaving releases out
too. Publishing's own tests of those paths run again in a process whose settings leave the
app out.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

#: Publishing's tests of its core paths, none of which needs an optional app.
CORE_TESTS = [
    "tests/publishing/test_job.py",
    "tests/publishing/test_deletion.py",
    "tests/publishing/test_admin.py",
    "tests/publishing/test_revisions.py",
]


@pytest.mark.parametrize("left_out", ["releases", "releases,reviews", "outbox"])
def test_publishing_passes_its_own_tests_without_an_optional_app(left_out, tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("one vendor shows it: the apps' wiring is the same on every database")
    env = {**os.environ, "INSTATIC_TEST_WITHOUT_APPS": left_out}
    # A test database of its own: the suite's run holds its own, which must not be touched.
    env["INSTATIC_TEST_TMP"] = str(tmp_path)
    env["INSTATIC_VAR_DIR"] = str(tmp_path / "var")
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *CORE_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout


def _setup_without(left_out: str) -> subprocess.CompletedProcess:
    code = (
        "import django; django.setup(); from django.apps import apps; "
        "print(apps.is_installed('releases'), apps.is_installed('reviews'))"
    )
    env = {**os.environ, "INSTATIC_TEST_WITHOUT_APPS": left_out}
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_the_settings_leave_an_app_out_when_asked():
    """The switch the test above uses really removes the apps (else it would prove nothing)."""
    done = _setup_without("releases,reviews")
    assert done.stdout.strip() == "False False", done.stderr[-2000:]


def test_releases_without_reviews_say_what_to_add():
    done = _setup_without("reviews")
    assert done.returncode != 0
    assert 'The releases app needs the reviews app: add "reviews" to INSTALLED_APPS' in (
        done.stderr
    )
