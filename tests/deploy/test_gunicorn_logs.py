"""gunicorn's access and error logs in the same JSON format as Django's."""

import json

import pytest

from devtools.servers import free_port
from tests.deploy.support import ScriptProcess, http_get, script_env, wait_for_status
from tests.support.polling import wait_until

# Once per `make test`: the log format is the same whatever the vendor.
pytestmark = pytest.mark.sqlite


@pytest.fixture
def web():
    procs = []

    def start(**env):
        proc = ScriptProcess("web.sh", env=script_env(**env))
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stop()
        print(f"----- web.sh (exit {proc.process.returncode}) -----\n{proc.log()[-3000:]}")


def entries(text: str) -> list[dict]:
    """Parse every line as one JSON object (fail on any line that is not)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_web_sh_logs_json_lines_when_asked(web):
    port = free_port()
    proc = web(
        PORT=str(port),
        INSTATIC_WEB_ADDRESS="127.0.0.1",
        WEB_CONCURRENCY="1",
        INSTATIC_LOG_FORMAT="json",
    )
    base = f"http://127.0.0.1:{port}"
    wait_for_status(f"{base}/healthz", proc=proc)
    assert http_get(f"{base}/readyz?probe=1", headers={"User-Agent": "probe/1"})[0] == 200

    def access_entry():
        for entry in entries(proc.log()):
            if entry.get("logger") == "gunicorn.access" and entry.get("path") == "/readyz":
                return entry
        return None

    access = wait_until(access_entry, timeout=10)
    assert access["method"] == "GET" and access["status"] == 200
    assert access["query"] == "probe=1" and access["user_agent"] == "probe/1"
    assert access["remote"] == "127.0.0.1" and access["duration"] >= 0
    assert proc.terminate() == 0
    lines = entries(proc.log())  # every line of stdout and stderr is one JSON object
    loggers = {entry["logger"] for entry in lines}
    assert {"gunicorn.error", "gunicorn.access"} <= loggers, loggers
    assert any("Booting worker" in e["message"] for e in lines if e["logger"] == "gunicorn.error")


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_web_sh_keeps_gunicorns_text_logs_by_default(web):
    port = free_port()
    proc = web(PORT=str(port), INSTATIC_WEB_ADDRESS="127.0.0.1", WEB_CONCURRENCY="1")
    wait_for_status(f"http://127.0.0.1:{port}/healthz", proc=proc)
    wait_until(lambda: '"GET /healthz HTTP/1.1" 200' in proc.log(), timeout=10)
    assert proc.terminate() == 0
