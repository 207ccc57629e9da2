"""The database server the test suite started, for tests that restart it or look inside it."""

import os

from django.db import connection

from devtools.mariadb import MariaDBServer
from devtools.pgcluster import PostgresCluster


def suite_server():
    """Return a handle on the suite's server (``restart()``, ``halt()``, ``resume()``), or None.

    ``devtools.testsuite`` exports the server it started (PostgreSQL or MariaDB); a suite run
    against a server someone else started cannot restart it, so such tests skip.
    """
    handles = {"postgresql": PostgresCluster, "mysql": MariaDBServer}
    handle = handles.get(connection.vendor)
    return handle.from_env(os.environ) if handle else None


_OTHER_SESSIONS_SQL = {
    "postgresql": (
        "SELECT application_name, state, query FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ),
    "mysql": (
        "SELECT ID, COMMAND, INFO FROM information_schema.PROCESSLIST"
        " WHERE DB = DATABASE() AND ID <> CONNECTION_ID()"
    ),
}


def other_sessions() -> list[tuple]:
    """Return the sessions on the test database other than this one's."""
    with connection.cursor() as cursor:
        cursor.execute(_OTHER_SESSIONS_SQL[connection.vendor])
        return list(cursor.fetchall())


#: A file (named by the test runner) that gets one line per session left on the test database.
LEAK_REPORT = "INSTATIC_TEST_LEAK_REPORT"


def report_sessions_left() -> list[tuple]:
    """Report the sessions still on the test database when the suite is done with it.

    Called just before the test database is destroyed: any session left then is a connection
    a test (or a thread it started) did not close, which makes PostgreSQL refuse to drop the
    database ("being accessed by other users"). Each one is written to the file
    ``INSTATIC_TEST_LEAK_REPORT`` names, which ``devtools.testsuite`` turns into a failed run.
    """
    if connection.vendor not in _OTHER_SESSIONS_SQL:
        return []
    left = other_sessions()
    connection.close()
    path = os.environ.get(LEAK_REPORT)
    lines = [f"a session on the test database is still open: {row!r}" for row in left]
    if path and lines:
        with open(path, "a") as report:
            report.write("".join(line + "\n" for line in lines))
    return left


def separate_postgresql_session():
    """Open a session of its own (autocommit) on the test database, with the test's
    credentials: a listener for ``NOTIFY``s, which the test's own session would not hear
    while it sends them. PostgreSQL only."""
    import psycopg

    settings_dict = connection.settings_dict
    return psycopg.connect(
        dbname=settings_dict["NAME"],
        user=settings_dict["USER"],
        password=settings_dict["PASSWORD"] or None,
        host=settings_dict["HOST"] or None,
        port=settings_dict["PORT"] or None,
        autocommit=True,
    )
