"""Hard limits on runs on workers: a run past its max_duration and a grace loses its process,
and a pool that cannot keep its processes up says so.

The deciding (``limits``, ``pool.pool_problems``) is tested with tables; the doing with a
real pool, a real job that ignores ``should_stop()`` and SIGKILL.
"""

import sys

import pytest
from django.test import override_settings

from coordination import services
from coordination.management.commands.runworker import pool_health
from coordination.metrics_server import SchedulerMetrics
from coordination.models import JobRun
from coordination.workers.limits import Limit, hard_deadline, overdue, parse_report, report_line
from coordination.workers.pool import CRASH_EXITS, CRASH_WINDOW, WorkerPool, pool_problems
from tests.conftest import FAST
from tests.coordination.test_scheduler_metrics import get
from tests.coordination.test_worker_pool import children
from tests.support.polling import wait_until
from tests.support.processes import ManagedProcess, process_env


def _limit(run_id=1, hard=10.0) -> Limit:
    return Limit(
        run_id=run_id, attempt=2, instance="abc", soft=hard - 1, hard=hard, words="ran past it"
    )


@pytest.mark.parametrize(
    ("started", "max_duration", "grace", "deadline"),
    [(100.0, 5.0, 10.0, 115.0), (100.0, 5.0, 0.0, 105.0), (100.0, 5.0, -3.0, 105.0)],
)
def test_hard_deadline(started, max_duration, grace, deadline):
    assert hard_deadline(started, max_duration, grace) == deadline


@pytest.mark.parametrize(
    ("now", "late"), [(9.99, []), (10.0, [1]), (15.0, [1]), (21.0, [1, 2])], ids=str
)
def test_overdue_runs_are_those_at_or_past_their_hard_deadline(now, late):
    limits = [_limit(1, hard=10.0), _limit(2, hard=20.0)]
    assert [limit.run_id for limit in overdue(limits, now)] == late


def test_the_pipe_lines_read_back_as_written():
    limit = Limit(
        run_id=7,
        attempt=2,
        instance="abc123",
        soft=1.5,
        hard=11.5,
        words="ran past its max_duration of 0:00:01 and 10 s more",
    )
    assert parse_report(report_line("start", limit).decode()) == ("start", limit)
    assert parse_report(report_line("end", run_id=7).decode()) == ("end", 7)


@pytest.mark.parametrize("line", ["", "start 1 2", "end x", "start a 1 i 1 2 w", "hello 1"])
def test_a_garbled_pipe_line_is_ignored(line):
    assert parse_report(line) is None


@pytest.mark.parametrize(
    ("exits", "now", "problems"),
    [
        ({1: [], 2: []}, 100.0, []),
        ({1: [10.0, 20.0]}, 30.0, []),  # two exits: restarted, still healthy
        ({1: [10.0, 20.0, 30.0]}, 30.0, ["worker process 1 exited 3 times in the last 60 s"]),
        ({1: [10.0, 20.0, 30.0]}, 30.0 + CRASH_WINDOW - 10.0, []),  # it has kept running
        ({2: [1.0, 2.0, 3.0, 4.0]}, 5.0, ["worker process 2 exited 4 times in the last 60 s"]),
    ],
    ids=["quiet", "two-exits", "crash-loop", "recovered", "other-child"],
)
def test_pool_problems(exits, now, problems):
    assert CRASH_EXITS == 3 and CRASH_WINDOW == 60.0
    assert pool_problems(exits, now) == problems


@pytest.mark.multiprocess
@pytest.mark.sqlite  # what the pool does with its processes: the same on every vendor
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.django_db(transaction=True)
def test_a_run_that_ignores_should_stop_past_its_hard_limit_loses_its_process():
    env = process_env(
        **{
            **FAST,
            "INSTATIC_TEST_EXTRA_APPS": "tests.coordination.stubbornapp",
            "INSTATIC_WORKER_KILL_GRACE": "0.5",
            "INSTATIC_SHUTDOWN_GRACE": "3",
        }
    )
    leader = ManagedProcess(
        ["runscheduler", "--group", "hatest_stubborn", "--workers", "0", "--node-name", "lead"],
        name="lead",
        env=env,
    )
    pool = ManagedProcess(
        ["runworker", "--processes", "1", "--node-name", "wk"], name="wk", env=env
    )
    try:
        leader.wait_for_log(r"acquired advisory lock", timeout=30)
        pool.wait_for_log(r"\[worker wk/worker-1\] waiting for runs", timeout=30)
        first = wait_until(lambda: children(pool.pid), timeout=10)
        wait_until(lambda: services.request_run("stubborn.ignores_stop"), timeout=10)
        pool.wait_for_log(r"stubborn run in flight", timeout=20)

        run = wait_until(
            lambda: JobRun.objects.filter(
                job="stubborn.ignores_stop", status=JobRun.Status.FAILED
            ).first(),
            timeout=20,
            message=f"not failed:\n{pool.log()[-3000:]}",
        )

        assert "ran past its max_duration of 0:00:01 and 0.5 s more" in run.error
        assert "its worker process was killed" in run.error
        assert run.node == "wk/worker-1"
        assert run.duration is not None and run.duration >= 1.5
        pool.wait_for_log(r"past their hard limit; killing the process", timeout=5)
        # The pool started a new process in its place, which serves.
        wait_until(
            lambda: (found := children(pool.pid)) and found != first,
            timeout=15,
            message=f"no new worker process:\n{pool.log()[-3000:]}",
        )
        pool.wait_for_log(r"\[worker wk/worker-1\] waiting for runs", count=2, timeout=30)
        from django_tasks_db.models import DBTaskResult

        task = DBTaskResult.objects.get(args_kwargs__args=[run.pk, run.attempt])
        assert task.status == "FAILED" and "its worker process was killed" in task.traceback
    finally:
        for proc in (pool, leader):
            proc.stop()
            print(f"----- {proc.name} -----\n{proc.log()[-3000:]}")


class _Exited:
    """Stands in for a child process that has exited with ``returncode``."""

    pid = 4242

    def __init__(self, returncode: int):
        self.returncode = returncode

    def poll(self):
        return self.returncode


def test_a_child_that_keeps_exiting_makes_its_pool_unhealthy_and_a_kill_does_not():
    pool = WorkerPool(count=2, node_name="n")
    first, second = pool._children
    for now in (100.0, 103.0, 109.0):
        first.process = _Exited(1)
        pool._exited(first, now)
    second.process, second.killed = _Exited(-9), True  # the pool's own kill of an overrun
    pool._exited(second, 109.0)

    problems = pool_problems({c.index: c.exits for c in pool._children}, 110.0)
    assert problems == ["worker process 1 exited 3 times in the last 60 s"]
    assert second.restart_at == 109.0  # started again at once


@override_settings(INSTATIC_HEALTH_TOKEN="health-secret")
def test_a_worker_only_nodes_healthz_answers_with_its_pools_health():
    class Pool:
        found: list[str] = []

        def problems(self):
            return self.found

        def running(self):
            return True

        def pids(self):
            return [1, 2]

    pool = Pool()
    metrics = SchedulerMetrics.serve("127.0.0.1", 0, health=lambda: pool_health(pool))
    try:
        assert get(metrics.port, "/healthz", token="health-secret") == (
            200,
            '{"status": "ok", "workers": 2}',
        )
        pool.found = ["worker process 1 exited 3 times in the last 60 s"]
        status, body = get(metrics.port, "/healthz", token="health-secret")
        assert status == 503
        assert "worker process 1 exited 3 times" in body
    finally:
        metrics.shutdown()
