"""Suite-wide fixtures: vendor markers, and helpers for tests that start real processes."""

import pytest
from django.db import connection, connections
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from tests.support.processes import process_env, start_scheduler

# Property tests are part of ``make test``: the same examples on every run (derandomized, no
# example database), no per-example deadline (these machines are shared and their speed varies;
# the properties that are about time measure it themselves).
hypothesis_settings.register_profile(
    "instatic",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
hypothesis_settings.load_profile("instatic")

VENDOR_MARKERS = {"postgresql", "mysql", "sqlite"}
#: Short lease and heartbeat so that freezes resolve in seconds, set as an operator would.
FAST = {"INSTATIC_LEASE": "3", "INSTATIC_HEARTBEAT_INTERVAL": "0.5", "INSTATIC_MAX_TICK": "2"}

# --- which vendors a test runs on -------------------------------------------------------------
# `make test` runs the suite on SQLite, MariaDB and PostgreSQL (devtools/testsuite.py). A test
# runs on every vendor when what it checks can differ between them, and once, on SQLite, when
# it cannot (README, "Which vendors a test runs on"):
#
# - marked ``postgresql``, ``mysql``, ``sqlite`` or ``server``: there only (skipped elsewhere);
# - marked ``every_vendor``: on every vendor;
# - using the database (``django_db``, the ``db`` fixtures), or a process or lock handle that
#   does (VENDOR_FIXTURES): on every vendor, unless its module is in SAME_ON_EVERY_VENDOR;
# - anything else (no database at all, or a browser reading pages that are the same on every
#   vendor, what the vendors do differently being tested below them): once, on SQLite.
#
# A test that runs once is deselected on the servers' runs, not skipped: their summaries count
# it as "deselected".

#: Fixtures through which a test reaches the database, itself or through processes it starts.
VENDOR_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "live_server",
        "schedulers",  # real runscheduler processes on the test database
        "holders",  # lock holders in other processes (tests/coordination/lockholder.py)
        "locks",  # lock handles of the vendor's backend
    }
)
#: Fixtures whose tests are the same on every vendor even when they use the database.
ONCE_FIXTURES = frozenset({"browser"})
#: Modules that use the database only to keep what they check, which is the same on every
#: vendor: none of their code paths takes a row lock, dispatches on the vendor or runs SQL
#: that only some vendors accept. Each with why.
SAME_ON_EVERY_VENDOR: dict[str, str] = {
    "tests/deploy/test_entry_scripts.py": (
        "the container's scripts: that they exec, pass SIGTERM on and answer the health checks; "
        "the processes they start are tested on every vendor in tests/coordination"
    ),
    "tests/media/test_s3_bucket.py": (
        "the bucket as the images' storage: the rows it keeps are the media app's, whose "
        "database behaviour tests/media tests on every vendor"
    ),
    "tests/plugins/test_operator_commands.py": (
        "that jobs and schedulerstatus print bad declarations first and still work; their "
        "work (pause and resume under a row lock) is tested on every vendor by "
        "tests/plugins/test_jobs_command.py"
    ),
}


def vendors_of(item) -> tuple[set[str] | None, bool]:
    """Return the vendors ``item`` runs on (``None``: every vendor), and whether a marker of
    the test says so (then it is skipped elsewhere, saying what it needs)."""
    wanted = VENDOR_MARKERS & {m.name for m in item.iter_markers()}
    if wanted:
        return wanted, True
    if item.get_closest_marker("server"):
        return {"mysql", "postgresql"}, True
    if item.get_closest_marker("every_vendor"):
        return None, True
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & ONCE_FIXTURES:
        return {"sqlite"}, False
    uses_database = item.get_closest_marker("django_db") or fixtures & VENDOR_FIXTURES
    if uses_database and item.nodeid.split("::")[0] not in SAME_ON_EVERY_VENDOR:
        return None, False
    return {"sqlite"}, False


def pytest_collection_modifyitems(config, items):
    vendor = connection.vendor
    kept, once = [], []
    for item in items:
        wanted, marked = vendors_of(item)
        if wanted is not None and vendor not in wanted:
            if not marked:
                once.append(item)
                continue
            item.add_marker(
                pytest.mark.skip(reason=f"needs {'/'.join(sorted(wanted))}, not {vendor}")
            )
        kept.append(item)
    if once:
        config.hook.pytest_deselected(items=once)
        items[:] = kept


def pytest_report_header(config):
    return f"instatic: database vendor {connection.vendor} ({connection.settings_dict['NAME']})"


@pytest.fixture
def schedulers():
    """Start real ``runscheduler`` processes (fast lease); stop them and show their logs after."""
    started = []

    def start(node: str, *groups: str, env: dict | None = None, extra_args=(), prefix=()):
        proc = start_scheduler(
            node,
            *groups,
            env=process_env(**{**FAST, **(env or {})}),
            extra_args=extra_args,
            prefix=prefix,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
        # Shown by pytest only when the test failed.
        print(f"----- {proc.name} (exit {proc.process.returncode}) -----\n{proc.log()[-4000:]}")
    connection.close()


@pytest.fixture
def browser(monkeypatch):
    """Debian's Chromium through Playwright (skipped without it, a failure under CI=true)."""
    from tests.support.browser import chromium

    # Playwright's sync API runs an event loop; the ORM calls in the tests happen outside it.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with chromium() as browser:
        # While Playwright's loop runs, the ORM hands this thread other connection objects
        # than outside it (asgiref's Local follows the loop), kept from the last browser test:
        # one a restarted database server ended would fail this test's first query.
        connections.close_all()
        yield browser
        connections.close_all()


# Nothing a run started outlives it (tests/support/processes.py, devtools/testsuite.py).
def pytest_configure(config):
    from tests.support.processes import interrupt_on_sigterm

    interrupt_on_sigterm()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """Stop every process the tests started before anything else is torn down."""
    from tests.support.processes import stop_children

    stop_children()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test databases; report sessions still open on them before they go."""
    from tests.support.databases import report_sessions_left

    yield
    with django_db_blocker.unblock():
        report_sessions_left()
