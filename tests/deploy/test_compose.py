"""``docker-compose.yml``, checked without a Docker engine: everything it names must exist.

Commands resolve through the image's entry point to ``deploy/*.sh``; health checks name
scripts in the image; every variable a service gets is one Instatic (its settings or its entry
scripts) reads; no secret is committed.
"""

import json
import os
import re

import pytest
from django.core.management import get_commands

from tests.support.processes import BASE_DIR

# Once per `make test`: it reads the compose file.
pytestmark = pytest.mark.sqlite

yaml = pytest.importorskip("yaml", reason="PyYAML is in requirements-dev.txt")

COMPOSE = BASE_DIR / "docker-compose.yml"
APP_DIR = "/app"
# Documented by the postgres image (https://hub.docker.com/_/postgres, "Environment Variables").
POSTGRES_IMAGE_VARIABLES = {
    "POSTGRES_PASSWORD",
    "POSTGRES_USER",
    "POSTGRES_DB",
    "POSTGRES_INITDB_ARGS",
    "POSTGRES_INITDB_WALDIR",
    "POSTGRES_HOST_AUTH_METHOD",
    "PGDATA",
}
REQUIRED = re.compile(r"^\$\{(\w+):\?[^}]+\}$")


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose):
    return compose["services"]


def settings_variables() -> set[str]:
    """Return every environment variable ``instatic/settings.py`` reads."""
    text = (BASE_DIR / "instatic" / "settings.py").read_text()
    return set(re.findall(r"""_env\(\s*\w+,\s*["'](\w+)["']""", text))


def script_variables() -> set[str]:
    """Return every variable the entry scripts read (``${NAME:-default}``)."""
    names = set()
    for script in (BASE_DIR / "deploy").glob("*.sh"):
        names |= set(re.findall(r"\$\{(\w+)[:}]", script.read_text()))
    return names


def entrypoint() -> str:
    for line in (BASE_DIR / "Dockerfile").read_text().splitlines():
        if line.startswith("ENTRYPOINT"):
            return json.loads(line.partition(" ")[2])[0]
    raise AssertionError("the Dockerfile has no ENTRYPOINT")


def in_repo(container_path: str):
    assert container_path.startswith(APP_DIR + "/"), container_path
    return BASE_DIR / container_path.removeprefix(APP_DIR + "/")


def app_services(services) -> dict:
    return {name: s for name, s in services.items() if "build" in s}


def seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    total = 0.0
    for amount, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", str(duration)):
        total += float(amount) * units[unit]
    return total


def test_the_app_services_are_built_from_this_repository(services):
    apps = app_services(services)
    assert set(apps) == {"migrate", "web", "scheduler", "worker"}
    for service in apps.values():
        assert (BASE_DIR / service["build"] / "Dockerfile").exists()


def test_every_command_resolves_to_an_executable_entry_script(services):
    script = in_repo(entrypoint())
    assert script.exists() and os.access(script, os.X_OK)
    for name, service in app_services(services).items():
        kind, *rest = service["command"]
        if kind == "manage":  # the entry point execs `python manage.py <rest>`
            assert rest and rest[0] in get_commands(), f"{name}: no manage.py command {rest}"
            continue
        assert kind in {"web", "scheduler", "migrate"}, f"{name}: unknown command {kind}"
        target = BASE_DIR / "deploy" / f"{kind}.sh"
        assert target.exists() and os.access(target, os.X_OK), f"{name}: {target} missing"


def test_every_health_check_names_an_existing_file(services):
    for name, service in services.items():
        check = service.get("healthcheck", {})
        if check.get("disable"):
            continue
        test = check["test"]
        assert test[0] in {"CMD", "CMD-SHELL"}, name
        for arg in test[1:]:
            if arg.startswith(APP_DIR + "/"):
                assert in_repo(arg).exists(), f"{name}: {arg} is not in the image"


def test_postgres_with_a_health_check_and_migrations_run_once_first(services):
    db = services["db"]
    assert db["image"].startswith("postgres:15")
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    migrate = services["migrate"]
    assert migrate["command"][0] == "migrate"
    assert migrate["restart"] == "no"
    assert migrate["depends_on"] == {"db": {"condition": "service_healthy"}}
    for name in ("web", "scheduler", "worker"):
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }


def test_long_running_services_restart_and_have_health_checks(services):
    for name in ("db", "web", "scheduler", "worker"):
        assert services[name]["restart"] == "unless-stopped", name
        assert not services[name]["healthcheck"].get("disable"), name
    assert services["web"]["healthcheck"]["test"][-1] == "web"
    assert services["scheduler"]["healthcheck"]["test"][-1] == "scheduler"
    assert services["worker"]["healthcheck"]["test"][-1] == "worker"


def test_scheduler_runs_three_replicas_that_get_their_grace_period(services):
    scheduler = services["scheduler"]
    assert scheduler["deploy"]["replicas"] == 3
    assert "INSTATIC_NODE_NAME" not in scheduler["environment"], "replicas need unique names"
    grace = float(scheduler["environment"]["INSTATIC_SHUTDOWN_GRACE"])
    assert grace < seconds(scheduler["stop_grace_period"]) <= grace + 30
    assert "ports" not in scheduler, "three replicas cannot publish one host port"


def test_worker_only_replicas_run_runworker_and_get_their_grace_period(services):
    worker = services["worker"]
    assert worker["command"] == ["manage", "runworker", "--metrics-port", "9100"]
    assert worker["environment"]["INSTATIC_METRICS_PORT"] == "9100"  # the health check's
    assert worker["restart"] == "unless-stopped"
    assert worker["deploy"]["replicas"] == 2
    assert "INSTATIC_NODE_NAME" not in worker["environment"], "replicas need unique names"
    assert int(worker["environment"]["INSTATIC_WORKERS"]) >= 1, "runworker refuses 0"
    assert (
        worker["environment"]["DATABASE_URL"]
        == services["scheduler"]["environment"]["DATABASE_URL"]
    )
    grace = float(worker["environment"]["INSTATIC_SHUTDOWN_GRACE"])
    assert grace < seconds(worker["stop_grace_period"]) <= grace + 30
    assert "ports" not in worker


def test_web_gets_gunicorns_graceful_timeout_before_sigkill(services):
    default = re.search(
        r"\$\{GUNICORN_GRACEFUL_TIMEOUT:-(\d+)\}", (BASE_DIR / "deploy" / "web.sh").read_text()
    )
    graceful = float(services["web"]["environment"].get("GUNICORN_GRACEFUL_TIMEOUT", 0)) or float(
        default.group(1)
    )
    assert seconds(services["web"]["stop_grace_period"]) > graceful


def test_every_service_variable_is_one_instatic_reads(services):
    known = settings_variables() | script_variables()
    assert {"DATABASE_URL", "DJANGO_SECRET_KEY", "INSTATIC_LEASE"} <= known
    for name, service in services.items():
        allowed = POSTGRES_IMAGE_VARIABLES if name == "db" else known
        unknown = set(service.get("environment", {})) - allowed
        assert not unknown, f"{name}: variables nothing reads: {sorted(unknown)}"


def test_no_secret_is_committed(services):
    for name, service in services.items():
        for key, value in service.get("environment", {}).items():
            if "SECRET" in key or "PASSWORD" in key:
                assert REQUIRED.match(str(value)), f"{name}.{key} must be ${{{key}:?…}}"
        url = service.get("environment", {}).get("DATABASE_URL")
        if url:
            assert "${POSTGRES_PASSWORD:?" in url
    assert services["web"]["environment"]["DJANGO_SECRET_KEY"].startswith("${DJANGO_SECRET_KEY:?")
