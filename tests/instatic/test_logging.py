"""``INSTATIC_LOG_FORMAT=json``: one JSON object per line with the scheduler's context."""

import json
import logging
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from instatic.logging import JSONFormatter, group_from_message
from tests.support.processes import BASE_DIR, process_env

# Once per `make test`: the log format is the same whatever the vendor.
pytestmark = pytest.mark.sqlite


def record(message, *args, level=logging.INFO, name="coordination.loop", exc_info=None, **extra):
    rec = logging.LogRecord(name, level, __file__, 1, message, args, exc_info)
    rec.created = datetime(2026, 5, 1, 12, 0, 0, 123000, tzinfo=UTC).timestamp()
    for key, value in extra.items():
        setattr(rec, key, value)
    return rec


def formatted(rec) -> dict:
    line = JSONFormatter().format(rec)
    assert "\n" not in line
    return json.loads(line)


def test_basic_fields():
    entry = formatted(record("node %s stopped", "replica-1", level=logging.WARNING))
    assert entry == {
        "time": "2026-05-01T12:00:00.123+00:00",
        "level": "WARNING",
        "logger": "coordination.loop",
        "message": "node replica-1 stopped",
    }


@pytest.mark.parametrize(
    ("message", "group"),
    [
        ("[publish-scheduler] acquired advisory lock, running scheduled publish…", "publishing"),
        ("[plugin-scheduler] released advisory lock key 1", "plugins"),
        ("[hatest-scheduler] job hatest.tick slot x succeeded", "hatest"),
        ("node replica-1 (pid 1 on h) running groups plugins", None),
        ("see [publish-scheduler] later", None),
    ],
)
def test_group_comes_from_the_documented_prefix(message, group):
    assert group_from_message(message) == group
    entry = formatted(record(message))
    assert entry.get("group") == group
    assert entry["message"] == message  # the documented text form is kept


def test_context_from_extra_wins_and_is_serialized():
    slot = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    entry = formatted(
        record(
            "[publish-scheduler] job %s ran",
            "publishing.publish_due",
            node="replica-2",
            group="publishing-custom",
            job="publishing.publish_due",
            slot=slot,
            event="run.succeeded",
        )
    )
    assert entry["node"] == "replica-2"
    assert entry["group"] == "publishing-custom"
    assert entry["job"] == "publishing.publish_due"
    assert entry["slot"] == "2026-05-01T12:00:00+00:00"
    assert entry["event"] == "run.succeeded"


def test_multi_line_messages_and_tracebacks_stay_on_one_line():
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        entry = formatted(record("job failed:\n%s", "details", exc_info=sys.exc_info()))
    assert entry["message"] == "job failed:\ndetails"
    assert "Traceback" in entry["exception"] and "ValueError: bad" in entry["exception"]


def test_unicode_is_kept_readable():
    line = JSONFormatter().format(record("running scheduled publish…"))
    assert "…" in line


def run_once(**env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            str(BASE_DIR / "manage.py"),
            "runscheduler",
            "--once",
            "--group",
            "publishing",
            "--node-name",
            "log-node",
        ],
        cwd=BASE_DIR,
        env=process_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_runscheduler_logs_json_lines_when_asked():
    result = run_once(INSTATIC_LOG_FORMAT="json")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines, "runscheduler logged nothing"
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    acquired = [e for e in entries if "acquired advisory lock" in e["message"]]
    assert acquired and acquired[0]["group"] == "publishing"
    assert acquired[0]["logger"] == "coordination.loop"
    assert {"time", "level", "logger", "message"} <= set(acquired[0])


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_text_stays_the_default():
    result = run_once()
    assert result.returncode == 0, result.stderr
    assert " INFO coordination.loop [publish-scheduler] acquired advisory lock" in result.stderr
    assert not result.stderr.lstrip().startswith("{")


@pytest.mark.multiprocess
def test_an_unknown_log_format_is_refused_in_one_line():
    result = subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), "check"],
        cwd=BASE_DIR,
        env=process_env(INSTATIC_LOG_FORMAT="xml"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "INSTATIC_LOG_FORMAT" in result.stderr and "json" in result.stderr
