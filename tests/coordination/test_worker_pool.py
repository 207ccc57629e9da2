"""Worker processes beside the scheduler (``runscheduler --workers N``) and on their own
(``runworker --processes N``): they start, are started again when they die, stop within the
grace period, and never outlive their parent, even one killed with SIGKILL.

The children are found through ``/proc`` (their parent's pid), so every check is about real
processes; waits poll with deadlines.
"""

import os
import re
import signal
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from coordination.registry import registry
from coordination.workers.pool import RESTART_INTERVAL, Restart, describe_exit, plan_restart
from devtools.freezing import freeze
from devtools.proctable import live_children
from tests.support.polling import wait_until
from tests.support.processes import ManagedProcess, logged_at, process_env

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

#: Once per `make test` (in the SQLite run): what the kernel and the pool do with processes
#: (restarts, kills, priority), or a database URL of the test's own; the same on every vendor.
ONCE = pytest.mark.sqlite


SERVING = r"worker process \d+ of node {node} serving"


# --- deciding: when an exited child starts again ---------------------------------------------
@pytest.mark.parametrize(
    ("lived", "gap", "expected"),
    [
        # Lived its gap or longer: at once, and the gap is back to the interval.
        (3.0, 3.0, Restart(delay=0.0, gap=3.0)),
        (500.0, 3.0, Restart(delay=0.0, gap=3.0)),
        (30.0, 24.0, Restart(delay=0.0, gap=3.0)),
        # Exited sooner (crashing at start): the rest of the gap, and the gap doubles.
        (1.0, 3.0, Restart(delay=2.0, gap=6.0)),
        (0.0, 3.0, Restart(delay=3.0, gap=6.0)),
        (1.0, 6.0, Restart(delay=5.0, gap=12.0)),
        (10.0, 24.0, Restart(delay=14.0, gap=48.0)),
        # ... up to the cap.
        (1.0, 48.0, Restart(delay=47.0, gap=60.0)),
        (1.0, 60.0, Restart(delay=59.0, gap=60.0)),
    ],
)
def test_plan_restart(lived, gap, expected):
    assert plan_restart(lived=lived, gap=gap, interval=3.0, cap=60.0) == expected


def test_no_two_starts_of_a_child_are_closer_than_the_interval():
    """However early a child keeps exiting, it starts at most once per interval."""
    gap, started = 3.0, 0.0
    for lived in [0.0, 0.1, 2.9, 0.5, 100.0, 0.0, 3.0, 1.0]:
        restart = plan_restart(lived=lived, gap=gap, interval=3.0, cap=60.0)
        next_start = started + lived + restart.delay
        assert next_start - started >= 3.0
        started, gap = next_start, restart.gap


@pytest.mark.parametrize(
    ("returncode", "words"),
    [
        (1, "exited with code 1"),
        (0, "exited with code 0"),
        (-signal.SIGKILL, "was killed by SIGKILL"),
        (-signal.SIGSEGV, "was killed by SIGSEGV"),
    ],
)
def test_describe_exit(returncode, words):
    assert describe_exit(returncode) == words


# --- refusals -------------------------------------------------------------------------------
def test_runworker_refuses_zero_processes_in_one_line():
    with pytest.raises(CommandError) as refused:
        call_command("runworker", "--processes", "0", "--node-name", "w")
    message = str(refused.value)
    assert message.startswith("runworker needs at least 1 worker process, not 0 (--processes")
    assert "runscheduler --workers 0" in message


def test_runworker_refuses_zero_processes_from_the_setting(settings):
    settings.INSTATIC_WORKERS = 0
    with pytest.raises(CommandError, match="runworker needs at least 1 worker process, not 0"):
        call_command("runworker")


def test_runworker_refuses_process_0():
    with pytest.raises(CommandError, match=r"--process must be 1 or more, not 0\."):
        call_command("runworker", "--process", "0")


def test_runworker_is_a_pool_or_one_process_not_both():
    with pytest.raises(CommandError, match="not allowed with argument"):
        call_command("runworker", "--process", "1", "--processes", "2")


@pytest.mark.parametrize("mode", [["--processes", "1"], ["--process", "1"]], ids=["pool", "one"])
def test_runworker_refuses_invalid_job_declarations_in_one_line(mode):
    with registry.temporary():
        registry.errors.append("a/jobs.py:1: job 'a.b': bad")
        with pytest.raises(CommandError) as refused:
            call_command("runworker", *mode)
    assert str(refused.value).startswith(
        "runworker refuses to start: 1 invalid job declaration (coordination.E001): "
        "a/jobs.py:1: job 'a.b': bad."
    )


@pytest.mark.django_db(transaction=True)
def test_runscheduler_once_starts_no_workers(settings, caplog):
    settings.INSTATIC_WORKERS = 2
    with caplog.at_level("INFO", logger="coordination"):
        call_command("runscheduler", "--once", "--group", "publishing", "--node-name", "once")
    assert "worker process" not in caplog.text
    assert not [p for p in children(os.getpid()) if "runworker" in cmdline(p)]


def test_runscheduler_refuses_negative_workers():
    with pytest.raises(CommandError, match="--workers must be 0 or more, not -1"):
        call_command("runscheduler", "--once", "--workers", "-1")


# --- doing: real processes --------------------------------------------------------------------
def children(parent: int) -> list[int]:
    """Return the live (not zombie) processes whose parent is ``parent``."""
    return live_children(parent)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for_children(proc: ManagedProcess, count: int, *, timeout: float = 15.0) -> list[int]:
    return wait_until(
        lambda: len(found := children(proc.pid)) == count and found,
        timeout=timeout,
        message=f"{proc.name}: not {count} children within {timeout}s:\n{proc.log()[-3000:]}",
    )


def wait_gone(pids, *, timeout: float = 10.0, log: str = "") -> None:
    wait_until(
        lambda: not any(alive(pid) for pid in pids),
        timeout=timeout,
        message=f"still running after {timeout}s: {[p for p in pids if alive(p)]}\n{log[-3000:]}",
    )


@pytest.fixture
def nodes():
    """Start ``manage.py`` processes; stop them (and their groups) after the test."""
    started = []

    def start(*args: str, name: str, **env: str) -> ManagedProcess:
        proc = ManagedProcess(
            list(args), name=name, env=process_env(**{"INSTATIC_SHUTDOWN_GRACE": "5", **env})
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
        print(f"----- {proc.name} (exit {proc.process.returncode}) -----\n{proc.log()[-4000:]}")


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_sigterm_stops_runworker_and_both_its_workers_within_the_grace(nodes):
    proc = nodes("runworker", "--processes", "2", "--node-name", "w2", name="w2")
    pids = wait_for_children(proc, 2)
    proc.wait_for_log(SERVING.format(node="w2"), count=2)
    assert all("runworker --process" in cmdline(p) for p in pids)

    proc.signal(signal.SIGTERM)

    assert proc.wait(timeout=5 + 5) == 0
    wait_gone(pids, log=proc.log())
    log = proc.log()
    assert len(re.findall(r"worker process \d of node w2 stopped", log)) == 2
    assert "worker processes of node w2 stopped" in log
    assert "starting it again" not in log


@ONCE
@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_with_sigkill_is_started_again(nodes):
    proc = nodes("runworker", "--processes", "1", "--node-name", "w1", name="w1")
    [first] = wait_for_children(proc, 1)
    proc.wait_for_log(SERVING.format(node="w1"))

    os.kill(first, signal.SIGKILL)

    proc.wait_for_log(
        rf"worker process 1 \(pid {first}\) of node w1 was killed by SIGKILL; starting it again"
    )
    proc.wait_for_log(SERVING.format(node="w1"), count=2)
    [second] = children(proc.pid)
    assert second != first


@ONCE
@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_a_worker_that_fails_at_start_is_started_again_later_each_time(nodes):
    """A worker that cannot start (no database here) does not spin: its starts are at least
    the interval apart, and the gap doubles while it keeps exiting early."""
    proc = nodes(
        "runworker",
        "--processes",
        "1",
        "--node-name",
        "broken",
        name="broken",
        DATABASE_URL="postgres://instatic@127.0.0.1:1/instatic",
        INSTATIC_STARTUP_DB_WAIT="0",
    )
    exited = (
        r"(?m)^(\S+ \S+) .*worker process 1 \(pid \d+\) of node broken exited with code 1;"
        r" starting it again in ([\d.]+)s$"
    )
    proc.wait_for_log(exited, count=2, timeout=20)
    log = proc.log()
    starts = [
        logged_at(t)
        for t in re.findall(r"(?m)^(\S+ \S+) .*worker process 1 of node broken started", log)
    ]
    exits = [(logged_at(t), float(d)) for t, d in re.findall(exited, log)]
    assert starts[1] - starts[0] >= RESTART_INTERVAL - 0.1
    (first_exit, _), (second_exit, second_delay) = exits[:2]
    if first_exit - starts[0] < RESTART_INTERVAL:  # exited early: the next gap is doubled
        assert second_exit + second_delay - starts[1] >= 2 * RESTART_INTERVAL - 0.1


@ONCE
@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_a_worker_that_does_not_stop_within_the_grace_is_killed(nodes):
    proc = nodes(
        "runworker",
        "--processes",
        "1",
        "--node-name",
        "stuck",
        name="stuck",
        INSTATIC_SHUTDOWN_GRACE="1",
    )
    [worker] = wait_for_children(proc, 1)
    proc.wait_for_log(SERVING.format(node="stuck"))
    freeze(worker)  # a stopped process cannot act on SIGTERM

    proc.signal(signal.SIGTERM)

    assert proc.wait(timeout=10) == 0
    wait_gone([worker], log=proc.log())
    assert re.search(
        rf"worker process 1 \(pid {worker}\) of node stuck did not stop within the grace",
        proc.log(),
    )


@ONCE
@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_a_parent_killed_with_sigkill_leaves_no_worker_behind(nodes):
    proc = nodes("runworker", "--processes", "2", "--node-name", "orphans", name="orphans")
    pids = wait_for_children(proc, 2)

    os.kill(proc.pid, signal.SIGKILL)

    assert proc.wait(timeout=10) == -signal.SIGKILL
    wait_gone(pids, log=proc.log())


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_runscheduler_runs_its_workers_and_sigterm_stops_them_too(schedulers):
    proc = schedulers(
        "sched-w", env={"INSTATIC_SHUTDOWN_GRACE": "5"}, extra_args=["--workers", "1"]
    )
    [worker] = wait_for_children(proc, 1)
    proc.wait_for_log(SERVING.format(node="sched-w"))
    proc.wait_for_log(r"node sched-w \(pid \d+ on .*\) running groups")

    proc.signal(signal.SIGTERM)

    assert proc.wait(timeout=5 + 10) == 0
    wait_gone([worker], log=proc.log())
    assert "worker process 1 of node sched-w stopped" in proc.log()


@ONCE
@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_runscheduler_workers_0_is_a_scheduler_only_node(schedulers):
    proc = schedulers("sched-only", env={"INSTATIC_WORKERS": "2"}, extra_args=["--workers", "0"])
    proc.wait_for_log(r"node sched-only \(pid \d+ on .*\) running groups")
    assert children(proc.pid) == []
    assert "worker process" not in proc.log()


@ONCE
@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_workers_run_at_the_lower_cpu_priority_of_the_setting(schedulers):
    """``INSTATIC_WORKER_NICE``: the worker processes, not their node, lower their priority."""
    proc = schedulers("sched-nice", env={"INSTATIC_WORKERS": "1", "INSTATIC_WORKER_NICE": "7"})
    [child] = wait_for_children(proc, 1)
    proc.wait_for_log(SERVING.format(node="sched-nice") + r" \(nice 7\)")
    assert os.getpriority(os.PRIO_PROCESS, child) == 7
    assert os.getpriority(os.PRIO_PROCESS, proc.pid) == os.getpriority(os.PRIO_PROCESS, 0)


def test_runscheduler_starts_the_workers_of_the_setting(schedulers):
    proc = schedulers("sched-env", env={"INSTATIC_WORKERS": "2"})
    wait_for_children(proc, 2)
    proc.wait_for_log(SERVING.format(node="sched-env"), count=2)
