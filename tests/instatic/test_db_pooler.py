"""``INSTATIC_DB_POOLER``: every process behind PgBouncer in transaction pooling mode works.

The settings are read in fresh processes (SQLite is enough). The admin and the static export
run as real processes through a real PgBouncer in transaction pooling mode (PostgreSQL); its
``server_round_robin`` hands consecutive transactions to different server connections, as a
busy pool does, so a server-side cursor declared in one is missing in the next every time.
"""

import subprocess
import sys
from io import StringIO

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.core import checks
from django.test import override_settings

from coordination.checks import scheduler_checks
from coordination.management.commands.runscheduler import Command as RunScheduler
from devtools.servers import free_port
from publishing.models import Post
from tests.deploy.support import http_get, wait_for_status
from tests.instatic.test_settings_env import one_line_error, settings_with
from tests.publishing.conftest import make_post
from tests.support.pgbouncer import bouncer_for_test_database
from tests.support.processes import BASE_DIR, ManagedProcess, process_env

# --- the setting ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "pooler", "server_side_cursors"),
    [
        ({}, "none", True),
        ({"INSTATIC_DB_POOLER": "pgbouncer-transaction"}, "pgbouncer-transaction", False),
        ({"INSTATIC_DB_POOLER": "PgBouncer-Transaction"}, "pgbouncer-transaction", False),
        ({"INSTATIC_LOCK_MODE": "transaction"}, "pgbouncer-transaction", False),
        ({"INSTATIC_LOCK_MODE": "transaction", "INSTATIC_DB_POOLER": "none"}, "none", True),
    ],
)
def test_the_pooler_setting_decides_what_django_may_keep_in_a_server_session(
    env, pooler, server_side_cursors
):
    values = settings_with(DATABASE_URL="postgres://u@db.example/instatic", **env)
    assert values["INSTATIC_DB_POOLER"] == pooler
    database = values["DATABASES"]["default"]
    assert database.get("DISABLE_SERVER_SIDE_CURSORS", False) is not server_side_cursors
    # Persistent client connections to the pooler stay (the pooler keeps the server's).
    assert database["CONN_MAX_AGE"] == 60 and database["CONN_HEALTH_CHECKS"] is True


def test_a_bad_pooler_is_one_line_naming_the_values():
    line = one_line_error(INSTATIC_DB_POOLER="pgbouncer")
    assert "INSTATIC_DB_POOLER='pgbouncer' is not one of none, pgbouncer-transaction" in line
    assert "INSTATIC_DB_POOLER=pgbouncer-transaction" in line


@override_settings(INSTATIC_DB_POOLER="pgbouncer-transaction", INSTATIC_LOCK_MODE="session")
def test_a_scheduler_with_session_locks_behind_the_pooler_is_warned():
    assert "coordination.W003" not in {issue.id for issue in checks.run_checks()}, (
        "a web process behind the pooler takes no locks: no warning there"
    )
    with scheduler_checks():
        assert "coordination.W003" in {issue.id for issue in checks.run_checks()}
    assert "coordination.W003" not in {issue.id for issue in checks.run_checks()}
    out = StringIO()
    RunScheduler(stdout=out, stderr=out).check(fail_level=checks.CRITICAL)  # SQLite: E010
    assert "coordination.W003" in out.getvalue()
    assert "INSTATIC_LOCK_MODE=transaction" in out.getvalue()


@pytest.mark.parametrize(
    "values",
    [
        {"INSTATIC_DB_POOLER": "pgbouncer-transaction", "INSTATIC_LOCK_MODE": "transaction"},
        {"INSTATIC_DB_POOLER": "none", "INSTATIC_LOCK_MODE": "session"},
    ],
)
def test_no_warning_when_the_lock_mode_fits_the_pooler(values):
    with override_settings(**values), scheduler_checks():
        assert "coordination.W003" not in {issue.id for issue in checks.run_checks()}


@pytest.mark.sqlite
@override_settings(INSTATIC_DB_POOLER="pgbouncer-transaction")
def test_a_transaction_pooler_for_another_database_than_postgresql_is_an_error():
    errors = [issue for issue in checks.run_checks() if issue.id == "coordination.E010"]
    assert errors and "points at sqlite" in errors[0].msg


# --- the web and the export through a real PgBouncer ------------------------------------------


@pytest.fixture
def round_robin_bouncer():
    with bouncer_for_test_database(server_round_robin=1, min_pool_size=2) as server:
        yield server


def bounced_env(bouncer, pooled: bool) -> dict:
    env = process_env(DATABASE_URL=bouncer.url())
    env.pop("INSTATIC_DB_POOLER", None)
    env.pop("INSTATIC_LOCK_MODE", None)
    if pooled:
        env["INSTATIC_DB_POOLER"] = "pgbouncer-transaction"
    return env


def signed_in_cookie(user) -> str:
    """Return a session cookie for ``user``, as the admin's login would set it."""
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return f"sessionid={session.session_key}"


ADMIN_PAGES = [
    "/admin/auth/group/add/",  # the permissions list iterates over its queryset
    "/admin/auth/user/{user}/change/",
    "/admin/auth/user/",
    "/admin/publishing/post/",
    "/admin/publishing/post/add/",
    "/admin/coordination/jobrun/",
    "/admin/coordination/jobstate/",
    "/admin/plugins/pluginjob/",
]


def admin_answers(bouncer, *, pooled: bool, cookie: str, user) -> tuple[dict[str, int], str]:
    """GET the admin pages from a web process through ``bouncer``: {page: status}, its log."""
    port = free_port()
    web = ManagedProcess(
        ["runserver", f"127.0.0.1:{port}", "--noreload"],
        name=f"web-{'pooled' if pooled else 'plain'}",
        env=bounced_env(bouncer, pooled),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for_status(f"{base}/healthz", proc=web)
        return {
            page: http_get(base + page.format(user=user.pk), headers={"Cookie": cookie})[0]
            for page in ADMIN_PAGES
        }, web.log()
    finally:
        web.stop()


def export(bouncer, tmp_path, *, pooled: bool) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), "exportsite", str(tmp_path / "site")],
        cwd=BASE_DIR,
        env=bounced_env(bouncer, pooled),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.postgresql
@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_the_admin_and_the_export_work_through_a_transaction_pooler(round_robin_bouncer, tmp_path):
    user = get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    for _ in range(30):
        make_post(status=Post.Status.PUBLISHED)
    cookie = signed_in_cookie(user)

    answers, log = admin_answers(round_robin_bouncer, pooled=True, cookie=cookie, user=user)
    assert set(answers.values()) == {200}, f"{answers}\n{log[-3000:]}"
    done = export(round_robin_bouncer, tmp_path, pooled=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "current" / "index.html").exists()

    # Without the setting, the first page or export that iterates fails.
    answers, log = admin_answers(round_robin_bouncer, pooled=False, cookie=cookie, user=user)
    assert answers["/admin/auth/group/add/"] == 500 and "InvalidCursorName" in log, answers
    failed = export(round_robin_bouncer, tmp_path / "plain", pooled=False)
    assert failed.returncode != 0 and "InvalidCursorName" in failed.stdout + failed.stderr
