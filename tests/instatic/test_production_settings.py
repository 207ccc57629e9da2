"""Production settings, exercised as an operator would: ``manage.py`` in a fresh process.

The environment is built from scratch (nothing from the test settings leaks in) with what a
deployment sets: no ``DJANGO_DEBUG``, a long random secret, real host names. Misconfiguration
must stop the process with one clear line, never a traceback.
"""

import re
import secrets
import subprocess
import sys

import pytest

from devtools.servers import free_port
from tests.deploy.support import production_env
from tests.support.processes import BASE_DIR, database_url

# Every vendor unless marked: `check --deploy` runs the checks on the run's own database (the
# coordination checks read its vendor), though the test itself does not use it.
pytestmark = [pytest.mark.multiprocess, pytest.mark.every_vendor]

ACCEPTED = ("postgres://", "postgresql://", "sqlite://", "mysql://")
#: For a process that stops on its settings or on a ``DATABASE_URL`` of its own, before it
#: uses the run's database: the same on every vendor, so once per `make test`.
STOPS_BEFORE_THE_DATABASE = pytest.mark.sqlite


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), *args],
        cwd=BASE_DIR,
        env=production_env(DJANGO_SETTINGS_MODULE="instatic.settings", **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def production(tmp_path, **overrides) -> dict:
    env = {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "example.com",
        "DATABASE_URL": database_url(),
        "INSTATIC_VAR_DIR": str(tmp_path / "var"),
    }
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def one_clear_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_check_deploy_is_clean_with_production_variables(tmp_path):
    env = production(
        tmp_path, DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS="1", DJANGO_SECURE_HSTS_PRELOAD="1"
    )
    assert len(env["DJANGO_SECRET_KEY"]) >= 50
    result = manage("check", "--deploy", "--fail-level", "WARNING", **env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_reminds_of_hsts_subdomains_and_preload_left_off(tmp_path):
    """They are off by default (they bind every subdomain); Django's own check says so."""
    result = manage("check", "--deploy", "--fail-level", "WARNING", **production(tmp_path))
    warnings = sorted(set(re.findall(r"security\.W\d+", result.stderr)))
    assert warnings == ["security.W005", "security.W021"], result.stderr


def test_check_deploy_fails_when_production_hardening_is_switched_off(tmp_path):
    """The clean run above means something: the same check catches a weakened setting."""
    env = production(tmp_path, DJANGO_SECURE_SSL_REDIRECT="0", DJANGO_SECURE_HSTS_SECONDS="0")
    result = manage("check", "--deploy", "--fail-level", "WARNING", **env)
    assert result.returncode != 0
    assert "security.W008" in result.stderr and "security.W004" in result.stderr


@STOPS_BEFORE_THE_DATABASE
def test_missing_secret_key_in_production_is_one_clear_line(tmp_path):
    line = one_clear_line(manage("check", **production(tmp_path, DJANGO_SECRET_KEY=None)))
    assert "DJANGO_SECRET_KEY is not set" in line
    assert "DJANGO_DEBUG" in line


@STOPS_BEFORE_THE_DATABASE
@pytest.mark.parametrize(
    "url",
    ["redis://x", "postgres://", "postgres://user@host:5432/", "http://example.com/db", "nonsense"],
)
def test_bad_database_url_is_one_clear_line_naming_the_accepted_schemes(tmp_path, url):
    line = one_clear_line(manage("check", **production(tmp_path, DATABASE_URL=url)))
    assert line.startswith("DATABASE_URL is invalid")
    for scheme in ACCEPTED:
        assert scheme in line


@STOPS_BEFORE_THE_DATABASE
@pytest.mark.parametrize(
    "command", [["runscheduler", "--once"], ["migrate", "--noinput"], ["schedulerstatus"]]
)
def test_commands_against_a_postgresql_server_that_is_down(tmp_path, command):
    down = f"postgres://instatic:secret@127.0.0.1:{free_port()}/instatic"
    env = production(tmp_path, DATABASE_URL=down, INSTATIC_STARTUP_DB_WAIT="0")
    line = one_clear_line(manage(*command, **env))
    assert "cannot connect to the database at postgresql://127.0.0.1:" in line
    assert "DATABASE_URL" in line
    assert "secret" not in line, "the password must not be printed"


@STOPS_BEFORE_THE_DATABASE
@pytest.mark.parametrize("variable", ["INSTATIC_HEALTH_TOKEN", "INSTATIC_METRICS_TOKEN"])
def test_a_short_bearer_token_is_one_clear_line(tmp_path, variable):
    line = one_clear_line(manage("check", **production(tmp_path, **{variable: "letmein"})))
    assert line.startswith(f"{variable} is 7 characters long; use at least 32")
