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


def pytest_collection_modifyitems(config, items):
    vendor = connection.vendor
    for item in items:
        wanted = VENDOR_MARKERS & {m.name for m in item.iter_markers()}
        if not wanted and "browser" in getattr(item, "fixturenames", ()):
            # A browser test reads the admin's pages, which are the same on every vendor (what
            # the vendors do differently is tested below them): once per `make test`.
            wanted = {"sqlite"}
        if wanted and vendor not in wanted:
            item.add_marker(
                pytest.mark.skip(reason=f"needs {'/'.join(sorted(wanted))}, not {vendor}")
            )
        if item.get_closest_marker("server") and vendor == "sqlite":
            item.add_marker(pytest.mark.skip(reason="needs a database server, not sqlite"))


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
