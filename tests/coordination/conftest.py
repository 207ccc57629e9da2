"""Fixtures shared by the coordination tests (lock holders, lock handles, schedulers)."""

import pytest
from django.db import connection

from coordination.locks import make_lock
from tests.coordination.lockholder import Holders
from tests.support.processes import process_env, start_scheduler

#: Short lease and heartbeat so that freezes resolve in seconds, set as an operator would.
FAST = {"INSTATIC_LEASE": "3", "INSTATIC_HEARTBEAT_INTERVAL": "0.5", "INSTATIC_MAX_TICK": "2"}


@pytest.fixture
def holders():
    """Lock-holder subprocesses that are always stopped after the test."""
    with Holders() as started:
        yield started


@pytest.fixture
def key(request) -> str:
    """A lock name of this test's own, so no two tests share a key."""
    return f"test:{request.node.name}"


@pytest.fixture
def locks():
    """Make lock handles in this process that are always closed after the test."""
    made = []

    def make(*args, **kwargs):
        made.append(make_lock(*args, **kwargs))
        return made[-1]

    yield make
    for lock in made:
        lock.close()


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
