"""JSON log lines from job code carry the run's node, group, job, slot and run id.

The worker sets them in context variables around the job call; the JSON formatter reads them,
so a job needs no ``extra=`` and a library logger inside the job gets them too.
"""

import json
import logging
from datetime import timedelta

import pytest

from coordination.models import JobRun
from instatic.logging import JSONFormatter
from plugins.sdk import make_plugin_job
from plugins.testing import make_due, run_tick
from tests.coordination.enginekit import centered_every

library_logger = logging.getLogger("some.library")


class JSONLines(logging.Handler):
    """Keep every record as the JSON object the formatter makes of it, at emit time."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.setFormatter(JSONFormatter())
        self.entries: list[dict] = []

    def emit(self, record):
        self.entries.append(json.loads(self.format(record)))


@pytest.fixture
def json_lines():
    handler = JSONLines()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler.entries
    root.removeHandler(handler)
    root.setLevel(old_level)


def _logging_job(ctx):
    ctx.logger.info("from the job's own logger")
    library_logger.warning("from a library the job calls")


@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
@pytest.mark.django_db(transaction=True)
def test_job_log_lines_carry_node_job_slot_and_run_id(json_lines, transactional):
    job = make_plugin_job(
        _logging_job,
        plugin="logctx",
        name="transactional" if transactional else "claim_first",
        schedule=centered_every(timedelta(minutes=1)),
        transactional=transactional,
    )
    make_due(job, ago=timedelta(seconds=1))
    run_tick(job, node="log-node")
    run = JobRun.objects.get(job=job.name)
    assert (run.status, run.slot) == (JobRun.Status.SUCCEEDED, job.schedule.slot(0))

    from_job = [e for e in json_lines if e["message"].startswith("from ")]
    assert len(from_job) == 2, json_lines
    for entry in from_job:
        assert entry["node"] == "log-node"
        assert entry["group"] == "plugins"
        assert entry["job"] == job.name
        assert entry["slot"] == run.slot.isoformat()
        assert entry["run_id"] == run.pk

    # Outside the job call the context is gone: the scheduler's own lines have no run_id.
    others = [e for e in json_lines if not e["message"].startswith("from ")]
    assert others and all("run_id" not in e for e in others)


def test_extra_fields_still_win_over_the_context():
    from coordination.logcontext import job_log_context

    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", (), None)
    record.job = "given.explicitly"
    with job_log_context(node="n", group="g", job="ctx.job", slot=None, run_id=7):
        entry = json.loads(JSONFormatter().format(record))
    assert entry["job"] == "given.explicitly" and entry["run_id"] == 7 and entry["node"] == "n"
