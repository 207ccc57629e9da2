"""``deploy/healthcheck.py``: what the container ``HEALTHCHECK`` runs every few seconds."""

import pytest

from devtools.servers import free_port
from tests.deploy.support import load_healthcheck

# Once per `make test`: it checks the health check script.
pytestmark = pytest.mark.sqlite

hc = load_healthcheck()

GUNICORN = b"/opt/venv/bin/python\0/opt/venv/bin/gunicorn\0instatic.wsgi:application\0--bind\0"
SCHEDULER = b"python\0manage.py\0runscheduler\0--metrics-port\x009100\0"
WORKER = b"python\0manage.py\0runworker\0--metrics-port\x009100\0"
MIGRATE = b"python\0manage.py\0migrate\0--noinput\0"


@pytest.mark.parametrize(
    ("cmdline", "kind"),
    [(GUNICORN, "web"), (SCHEDULER, "scheduler"), (WORKER, "worker"), (MIGRATE, None)],
)
def test_detects_the_process_kind_from_pid_1(cmdline, kind):
    assert hc.detect_kind(cmdline) == kind


@pytest.mark.parametrize(
    ("allowed", "host"),
    [
        ("example.com", "example.com"),
        (" www.example.com , example.com", "www.example.com"),
        (".example.com", "example.com"),
        ("*", "localhost"),
        ("", "localhost"),
    ],
)
def test_host_header_is_one_django_accepts(allowed, host):
    assert hc.host_header(allowed) == host


def test_targets_follow_the_entry_scripts_variables():
    url, headers = hc.target("web", {"PORT": "8123", "DJANGO_ALLOWED_HOSTS": "example.com"})
    assert url == "http://127.0.0.1:8123/healthz"
    assert headers == {"Host": "example.com", "X-Forwarded-Proto": "https"}
    assert hc.target("web", {})[0] == "http://127.0.0.1:8000/healthz"
    assert hc.target("scheduler", {})[0] == "http://127.0.0.1:9100/healthz"
    assert hc.target("worker", {})[0] == "http://127.0.0.1:9100/healthz"
    url, _ = hc.target("scheduler", {"INSTATIC_METRICS_PORT": "9200"})
    assert url == "http://127.0.0.1:9200/healthz"
    url, _ = hc.target("web", {"INSTATIC_WEB_ADDRESS": "::1", "PORT": "80"})
    assert url == "http://[::1]:80/healthz"


def test_the_health_token_is_sent_so_the_log_shows_the_reason():
    env = {"INSTATIC_HEALTH_TOKEN": "t" * 40}
    for kind in ("web", "scheduler"):
        assert hc.target(kind, env)[1]["Authorization"] == "Bearer " + "t" * 40
    assert "Authorization" not in hc.target("scheduler", {})[1]


@pytest.mark.parametrize(
    ("cmdline", "code"), [(GUNICORN, 1), (SCHEDULER, 1), (WORKER, 1), (MIGRATE, 0)]
)
def test_without_argument_checks_what_pid_1_runs(tmp_path, monkeypatch, capsys, cmdline, code):
    proc = tmp_path / "cmdline"
    proc.write_bytes(cmdline)
    monkeypatch.setattr(hc, "PROC_CMDLINE", str(proc))
    dead = str(free_port())  # nothing listens: a web or scheduler check must fail
    assert hc.main([], {"PORT": dead, "INSTATIC_METRICS_PORT": dead}) == code
    out = capsys.readouterr()
    if code:
        assert "unreachable" in out.err


def test_rejects_unknown_kinds(capsys):
    assert hc.main(["beat"], {}) == 2
    assert "usage" in capsys.readouterr().err
