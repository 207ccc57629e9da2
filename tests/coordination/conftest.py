"""Fixtures shared by the coordination tests (lock holders and lock handles, a listening leader,
worker-only nodes)."""

import pytest
from django.db import connection
from django.test import override_settings

from coordination import loop as loop_module
from coordination.locks import make_lock
from tests.conftest import FAST
from tests.coordination.lockholder import Holders
from tests.support.processes import ManagedProcess, process_env


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
def listening_leader(monkeypatch):
    """Only where NOTIFY reaches the leader (PostgreSQL); no safety-net tick during the test."""
    if connection.vendor != "postgresql":
        pytest.skip("needs postgresql: NOTIFY on the lock session")
    monkeypatch.setattr(loop_module, "REPLAN_WHILE_FINISHING", 3600.0)
    with override_settings(INSTATIC_NOTIFY_MAX_TICK=600):
        yield


@pytest.fixture
def workers():
    """Start worker-only nodes (``runworker --processes N``, fast lease, ``env`` on top);
    stop them after the test and show their logs (pytest prints them when it failed)."""
    started = []

    def start(node: str, *, processes: int = 1, env: dict | None = None) -> ManagedProcess:
        args = ["runworker", "--processes", str(processes), "--node-name", node]
        proc = ManagedProcess(args, name=node, env=process_env(**{**FAST, **(env or {})}))
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
        print(f"----- {proc.name} (exit {proc.process.returncode}) -----\n{proc.log()[-4000:]}")
