"""Configuration an operator can get wrong, exercised in fresh processes.

Each mistake stops ``manage.py`` with one line that says how to fix it, never a traceback and
never a silent fallback; the HTTPS settings that depend on the deployment are opt-in.
"""

import secrets

import pytest

from tests.instatic.test_production_settings import manage, one_clear_line, production

# Once per `make test`: the processes read settings from their own environment.
pytestmark = [pytest.mark.multiprocess, pytest.mark.sqlite]


def settings_value(tmp_path, expression: str, **env) -> str:
    """Return ``repr(expression)`` evaluated in a production process configured by ``env``."""
    code = (
        "from django.conf import settings; from django.test import RequestFactory; "
        f"print(repr({expression}))"
    )
    result = manage("shell", "--no-imports", "-c", code, **production(tmp_path, **env))
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


# --- DATABASE_URL ---------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["sqlite://relative.db", "sqlite://", "sqlite://:memory:"])
def test_a_sqlite_url_that_would_be_an_in_memory_database_is_refused(tmp_path, url):
    line = one_clear_line(manage("check", **production(tmp_path, DATABASE_URL=url)))
    assert line.startswith("DATABASE_URL=")
    assert "in-memory" in line
    assert "sqlite:///relative/path.sqlite3" in line and "sqlite:////absolute/" in line


def test_a_relative_sqlite_path_with_three_slashes_is_a_file(tmp_path):
    url = f"sqlite:///{tmp_path.relative_to(tmp_path.anchor)}/site.sqlite3"
    name = settings_value(tmp_path, "settings.DATABASES['default']['NAME']", DATABASE_URL=url)
    assert name.endswith("site.sqlite3'") and ":memory:" not in name


def test_mysql_without_its_driver_is_one_clear_line(tmp_path):
    fake = tmp_path / "no-driver" / "MySQLdb"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("No module named MySQLdb")\n')
    env = production(
        tmp_path,
        DATABASE_URL="mysql://instatic:secret@127.0.0.1:3306/instatic",
        PYTHONPATH=str(fake.parent),
    )
    line = one_clear_line(manage("check", **env))
    assert "mysqlclient" in line and "requirements-mysql.txt" in line
    assert "secret" not in line


@pytest.mark.parametrize("where", ["DATABASE_URL", "INSTATIC_VAR_DIR"])
def test_an_sqlite_path_that_cannot_be_written_is_one_clear_line(tmp_path, where):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    if where == "DATABASE_URL":
        env = production(tmp_path, DATABASE_URL=f"sqlite:///{blocker}/db.sqlite3")
    else:
        env = production(tmp_path, DATABASE_URL=None, INSTATIC_VAR_DIR=str(blocker / "var"))
    line = one_clear_line(manage("check", **env))
    assert "cannot create the SQLite database" in line and str(blocker) in line
    assert "writable" in line


# --- the secret key -------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["too-short", "x" * 49, "ab" * 40])
def test_a_weak_secret_key_in_production_stops_startup(tmp_path, key):
    line = one_clear_line(manage("check", **production(tmp_path, DJANGO_SECRET_KEY=key)))
    assert line.startswith("DJANGO_SECRET_KEY is too weak")
    assert "50" in line and "token_urlsafe(50)" in line
    assert key not in line, "the key itself is not printed"


def test_a_short_secret_key_is_fine_in_development(tmp_path):
    value = settings_value(tmp_path, "settings.DEBUG", DJANGO_SECRET_KEY="short", DJANGO_DEBUG="1")
    assert value == "True"


# --- HTTPS behind a proxy -------------------------------------------------------------------

FORWARDED_HTTPS = "RequestFactory().get('/', HTTP_X_FORWARDED_PROTO='https').is_secure()"


def test_x_forwarded_proto_is_not_trusted_by_default(tmp_path):
    assert settings_value(tmp_path, FORWARDED_HTTPS) == "False"
    assert settings_value(tmp_path, "settings.SECURE_PROXY_SSL_HEADER") == "None"


@pytest.mark.parametrize("value", ["X-Forwarded-Proto", "X-Forwarded-Proto=https"])
def test_x_forwarded_proto_is_trusted_when_the_operator_says_so(tmp_path, value):
    env = {"DJANGO_SECURE_PROXY_SSL_HEADER": value}
    assert settings_value(tmp_path, FORWARDED_HTTPS, **env) == "True"
    assert settings_value(tmp_path, "settings.SECURE_PROXY_SSL_HEADER", **env) == repr(
        ("HTTP_X_FORWARDED_PROTO", "https")
    )


@pytest.mark.parametrize("value", ["X Forwarded Proto", "=https", "X-Forwarded-Proto="])
def test_a_malformed_proxy_header_is_one_clear_line(tmp_path, value):
    env = production(tmp_path, DJANGO_SECURE_PROXY_SSL_HEADER=value)
    line = one_clear_line(manage("check", **env))
    assert line.startswith("DJANGO_SECURE_PROXY_SSL_HEADER=")
    assert "X-Forwarded-Proto" in line


# --- HSTS -----------------------------------------------------------------------------------

HSTS = (
    "(settings.SECURE_HSTS_SECONDS, settings.SECURE_HSTS_INCLUDE_SUBDOMAINS, "
    "settings.SECURE_HSTS_PRELOAD)"
)


def test_hsts_covers_this_host_only_and_is_not_preloaded_by_default(tmp_path):
    assert settings_value(tmp_path, HSTS) == "(31536000, False, False)"


def test_hsts_subdomains_and_preload_are_settings(tmp_path):
    env = {"DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS": "1", "DJANGO_SECURE_HSTS_PRELOAD": "yes"}
    assert settings_value(tmp_path, HSTS, **env) == "(31536000, True, True)"


def test_a_generated_key_passes(tmp_path):
    key = secrets.token_urlsafe(50)
    assert settings_value(tmp_path, "len(settings.SECRET_KEY)", DJANGO_SECRET_KEY=key) == "67"


# --- values that used to end in a traceback -----------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "problem", "example"),
    [
        ("INSTATIC_TIME_ZONE", "Mars/Olympus", "not a known time zone", "=Europe/Paris"),
        ("INSTATIC_LOG_LEVEL", "LOUD", "not a log level", "=WARNING"),
        ("DATABASE_URL", "postgres://u:p@[::1:5432/db", "Invalid IPv6 URL", "postgres://user:"),
        ("DATABASE_URL", "sqlite:///var/x.db?timeout=abc", "timeout='abc'", "?timeout=20"),
        ("DATABASE_URL", "sqlite:///var/x.db?timeot=5", "'timeot'", "?timeout=20"),
        ("INSTATIC_LOCK_MODE", "transacton", "not one of session, transaction", "=transaction"),
    ],
)
def test_a_bad_value_is_one_line_with_the_problem_and_an_example(
    tmp_path, variable, value, problem, example
):
    line = one_clear_line(manage("check", **production(tmp_path, **{variable: value})))
    assert line.startswith(variable), line
    assert problem in line and example in line, line


def test_check_creates_no_sqlite_folder_and_migrate_does(tmp_path):
    folder = tmp_path / "x" / "y"
    env = production(tmp_path, DATABASE_URL=f"sqlite:///{folder}/site.sqlite3")
    result = manage("check", **env)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "x").exists(), "check created the database's folder"
    result = manage("migrate", "-v", "0", **env)
    assert result.returncode == 0, result.stderr
    assert (folder / "site.sqlite3").is_file()
