"""A soak whose processes never all lead or serve stops with what is missing and why, instead
of waiting until whoever started it kills it (and leaves its processes behind)."""

import subprocess
import sys

import pytest

from devtools.chaos.records import Replica
from devtools.chaos.run import NotReady, wait_for_leaders

pytestmark = pytest.mark.sqlite


class StartingSoak:
    """The parts of a soak that readiness reads: its groups' leaders, its serving workers and
    its replicas (real processes, with real logs)."""

    session_groups = ("publishing", "plugins")

    def __init__(self, replicas: dict, leaders: dict, serving: int):
        self.replicas = replicas
        self.leaders = leaders
        self.serving = serving
        self.ready_wall = 0.0

    def leader(self, group: str):
        return self.leaders.get(group)

    def worker_targets(self) -> list:
        return [object()] * self.serving


def replica(tmp_path, index: int, code: str, *, workers: int = 1) -> Replica:
    log_path = tmp_path / f"chaos-{index}.1.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT
        )
    return Replica(index, 1, process, log_path, workers=workers)


def test_a_soak_whose_replicas_never_lead_stops_with_what_is_missing_and_their_logs(tmp_path):
    dead = replica(tmp_path, 1, "print('cannot reach the database'); raise SystemExit(3)")
    alive = replica(tmp_path, 2, "import time; print('connecting'); time.sleep(60)")
    dead.process.wait()
    soak = StartingSoak({1: dead, 2: alive}, leaders={"chaoslease": "chaos-lease-101.1"}, serving=1)
    try:
        with pytest.raises(NotReady) as raised:
            wait_for_leaders(soak, within=0.2)
    finally:
        alive.process.kill()
        alive.process.wait()
    said = str(raised.value)
    assert "no leader in group 'publishing'; no leader in group 'plugins'" in said
    assert "1 of 2 worker processes serving" in said
    assert "chaos-1.1, exited (3)" in said and "cannot reach the database" in said
    assert "chaos-2.1, running" in said
    assert soak.ready_wall == 0.0


def test_a_soak_whose_groups_lead_and_workers_serve_is_ready(tmp_path):
    leaders = {group: "chaos-1.1" for group in ("publishing", "plugins", "chaoslease")}
    soak = StartingSoak({}, leaders=leaders, serving=0)
    wait_for_leaders(soak, within=0.2)
    assert soak.ready_wall > 0
