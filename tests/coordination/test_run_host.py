"""A run sees its loop only through ``coordination.runhost.RunHost``.

The worker is read statically for every ``self.host.<name>`` it uses (each must be a member of
the protocol), the real ``GroupLoop`` is checked to provide every member, and a worker runs
both kinds of job against the real database under a host that has nothing but the protocol.
"""

import ast
import inspect
from datetime import timedelta

import pytest

from coordination import ledger, runner
from coordination.clock import DatabaseClock
from coordination.journal import ClaimJournal
from coordination.liveness import NodeIdentity
from coordination.models import JobRun, JobState
from coordination.planner import RunPlan
from coordination.runhost import RunHost
from coordination.runner import Worker
from coordination.scheduler import Scheduler
from tests.coordination.enginekit import GROUP, Recorder, declare, make_due

PROTOCOL_MEMBERS = {name for name in vars(RunHost) if not name.startswith("_")}


def host_members_used_by_worker() -> set[str]:
    """Return every ``name`` in ``self.host.<name>`` in the worker's source."""
    tree = ast.parse(inspect.getsource(runner.Worker))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "host"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "self"
    }


def test_the_worker_uses_only_what_the_run_host_protocol_declares():
    used = host_members_used_by_worker()
    assert used, "the worker no longer reaches its host as self.host: update this test"
    assert used <= PROTOCOL_MEMBERS, f"not in RunHost: {sorted(used - PROTOCOL_MEMBERS)}"


def test_the_worker_keeps_no_reference_to_the_whole_loop():
    source = inspect.getsource(runner)
    assert "self.loop" not in source


@pytest.mark.django_db
def test_the_group_loop_is_a_run_host():
    reg, _ = declare(Recorder())
    scheduler = Scheduler(groups=[GROUP], node_name="host-node", once=True, registry=reg)
    (loop,) = scheduler.loops
    assert isinstance(loop, RunHost)
    assert loop.log_prefix == loop.group.log_prefix


class BareHost:
    """A host with exactly the protocol's members, recording what the worker tells it."""

    def __init__(self):
        self.node = NodeIdentity(name="bare-node", instance="bare-instance", host="h", pid=1)
        self.clock = DatabaseClock()
        self.journal = ClaimJournal(
            node=self.node.name, instance=self.node.instance, log_prefix="bare"
        )
        self.log_prefix = "bare"
        self.stopping = False
        self.leading = True
        self.outcomes: list[tuple[str, str]] = []
        self.finished: list[tuple[str, bool]] = []

    def fence_work_transaction(self, connection) -> bool:
        return True

    def hold_off(self, job_name: str) -> bool:
        return True

    def release_hold(self, job_name: str) -> None:
        pass

    def submit(self, task) -> None:
        task()

    def request_maintenance(self) -> None:
        pass

    def function_ended(self, seconds: float) -> None:
        pass

    def finish_run(self, run, job, outcome) -> bool | None:
        return ledger.finish_with_state(run, job, outcome, instance=self.node.instance)

    def report_outcome(self, job, slot, status, duration, *, error=None, paused=False) -> None:
        self.outcomes.append((job.name, status))

    def run_finished(self, job_name: str, *, as_planned: bool) -> None:
        self.finished.append((job_name, as_planned))

    def cut_off(self, what: str) -> None:
        raise AssertionError(f"nothing should be cut off: {what}")

    def database_failed(self, exc: BaseException) -> None:
        raise AssertionError(f"the database should not fail: {exc}")

    def grace_deadline(self) -> float:
        return 0.0


def test_the_bare_host_has_exactly_the_protocol():
    host = BareHost()
    assert isinstance(host, RunHost)
    assert {name for name in dir(host) if not name.startswith("_")} - {
        "outcomes",
        "finished",
    } == PROTOCOL_MEMBERS


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
def test_a_worker_runs_a_slot_with_only_a_run_host(transactional):
    recorder = Recorder()
    _, job = declare(recorder, transactional=transactional)
    slot = make_due(job, ago=timedelta(0))
    host = BareHost()
    next_due = job.schedule.next_after(slot)

    worker = Worker(host, RunPlan(job=job, slot=slot, next_due=next_due))
    worker.mark_started()
    worker.run()

    assert recorder.slots == [slot]
    run = JobRun.objects.get(job=job.name, slot=slot)
    assert (run.status, run.node, run.node_instance) == (
        JobRun.Status.SUCCEEDED,
        "bare-node",
        "bare-instance",
    )
    state = JobState.objects.get(name=job.name)
    assert (state.last_status, state.last_node) == (JobRun.Status.SUCCEEDED, "bare-node")
    assert host.outcomes == [(job.name, JobRun.Status.SUCCEEDED)]
    assert host.finished == [(job.name, True)]
    assert not worker.is_alive()
