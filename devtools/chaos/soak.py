"""The soak's state and its hands: starting and stopping schedulers, and reading the database."""

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from devtools.chaos.clock import db_epoch
from devtools.chaos.config import (
    BASE_DIR,
    CHAIN_GROUP,
    HEARTBEAT,
    JOBS,
    LEASE,
    LEASE_GROUP,
    PGBOUNCER_CONFIG,
    RETRY_MAX,
    REVIEW_ENV,
    SESSION_GROUPS,
    SLOW_JOB,
    WEBHOOK_ENV,
    WORKER_JOBS,
    WORKER_NODE,
    WORKER_NODE_PROCESSES,
    WORKERS_PER_REPLICA,
)
from devtools.chaos.databases import SoakDatabase
from devtools.chaos.network import Network
from devtools.chaos.queries import placeholders
from devtools.chaos.records import (
    Fault,
    OnceRun,
    ReleaseRecord,
    Replica,
    SlowRun,
    WorkerTarget,
    replica_name,
)
from devtools.pgbouncer import PgBouncer
from devtools.proctable import processes


@dataclass
class Soak:
    """One soak: the server, the processes it started, what the editors did, the faults."""

    args: argparse.Namespace
    db: SoakDatabase
    network: Network
    workdir: Path
    rng: random.Random
    publish_job: str = ""
    replicas: dict[int, Replica] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    once_runs: list[OnceRun] = field(default_factory=list)
    run_requests: Counter = field(default_factory=Counter)
    catchup_from: datetime | None = None  # the earliest slot a catchup fault moved back to
    web: subprocess.Popen | None = None
    bouncer: PgBouncer | None = None  # what the lease-mode replicas connect through
    web_port: int = 0
    stop_stream: threading.Event = field(default_factory=threading.Event)
    editor_errors: int = 0
    editor_ops: Counter = field(default_factory=Counter)
    clock_offset: float = 0.0  # the database clock minus this process's (epoch seconds)
    # (slug, probe slot, seconds from the slot to the lone post's commit) of each quiet spell
    lone_commits: list = field(default_factory=list)
    # The images the editors' stream gave posts (their addresses), and the anonymous probe's
    # answers: (address, HTTP status or 0, database-clock epoch seconds when it came back).
    image_urls: list = field(default_factory=list)
    image_probes: list = field(default_factory=list)
    # When every group led and every worker process served (epoch seconds): runs queued
    # before that waited for the workers to start.
    ready_wall: float = 0.0
    # The soak's webhook receiver (devtools/chaos/webhooks.py) and its endpoint's ledger name.
    webhooks: object = None
    webhook_name: str = ""
    # The release stream (devtools/chaos/releases.py): what it made, by release id.
    releases: dict[int, ReleaseRecord] = field(default_factory=dict)
    release_errors: int = 0
    release_ops: Counter = field(default_factory=Counter)
    # The latest quiet spell's (from, until), database clock: no release is due in it. The
    # lock makes setting it (and moving the releases due in it) and scheduling a release
    # one after the other, so no release slips in.
    quiet_window: tuple[datetime, datetime] | None = None
    release_lock: threading.Lock = field(default_factory=threading.Lock)
    # Set while a quiet spell times its lone post's commit: the release stream waits.
    release_pause: threading.Event = field(default_factory=threading.Event)
    settled_db: datetime | None = None  # when the settle phase ended (database clock)

    def env(self, host: str = "127.0.0.1", *, lease: bool = False) -> dict:
        env = dict(os.environ)
        env.update(
            {
                "DATABASE_URL": self.bouncer.url() if self.lease_mode(lease) else self.db.url(host),
                "DJANGO_SETTINGS_MODULE": "tests.settings",
                "INSTATIC_TEST_EXTRA_APPS": "tests.chaosapp",
                "INSTATIC_VAR_DIR": str(self.workdir / "var"),
                "INSTATIC_LEASE": str(LEASE),
                "INSTATIC_HEARTBEAT_INTERVAL": str(HEARTBEAT),
                "INSTATIC_SHUTDOWN_GRACE": "5",
                "INSTATIC_FAILURE_PAUSE_THRESHOLD": "0",
                "INSTATIC_DB_RETRY_MAX": str(RETRY_MAX),
                "INSTATIC_LOCK_MODE": "transaction" if self.lease_mode(lease) else "session",
                "PYTHONUNBUFFERED": "1",
                **WEBHOOK_ENV,
                **REVIEW_ENV,
            }
        )
        if self.lease_mode(lease):
            # Lease mode renews only between ticks: coordination.E009 wants a tick under a
            # third of the lease.
            env["INSTATIC_MAX_TICK"] = str(LEASE / 6)
        return env

    @property
    def session_groups(self) -> tuple[str, ...]:
        """The groups the session-lock replicas run: CHAIN_GROUP too on PostgreSQL."""
        if self.db.vendor == "postgresql":
            return (*SESSION_GROUPS, CHAIN_GROUP)
        return SESSION_GROUPS

    def lease_mode(self, lease: bool) -> bool:
        """Lease lock mode is PostgreSQL's (behind PgBouncer); elsewhere LEASE_GROUP's replicas
        use the vendor's session lock like the others."""
        return lease and self.db.behind_pgbouncer

    def start_bouncer(self) -> None:
        """Start the PgBouncer (transaction pooling) the lease-mode replicas connect through."""
        if self.db.behind_pgbouncer:
            self.bouncer = PgBouncer(
                upstream_port=self.db.primary_port(),
                dbname="instatic",
                extra_config=PGBOUNCER_CONFIG,
            ).start()

    def follow_primary(self) -> None:
        """Point the PgBouncer at the server that accepts writes now (after a failover)."""
        if self.bouncer is not None:
            self.bouncer.follow(self.db.primary_port())

    # --- processes ---------------------------------------------------------------------
    def scheduler(self, name: str, log_path: Path, *, groups, env: dict, extra=(), prefix=()):
        """Start ``runscheduler`` for ``groups`` (never every group: lease mode stays apart)."""
        group_args = [arg for group in groups for arg in ("--group", group)]
        return subprocess.Popen(
            [
                *prefix,
                sys.executable,
                str(BASE_DIR / "manage.py"),
                "runscheduler",
                "--node-name",
                name,
                *group_args,
                *extra,
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=open(log_path, "wb"),  # noqa: SIM115 - owned by the child
            stderr=subprocess.STDOUT,
        )

    def start_replica(self, index: int, *, lease: bool = False) -> Replica:
        """Start (or restart) replica ``index``; lease replicas run on the host, not in a netns."""
        previous = self.replicas.get(index)
        incarnation = previous.incarnation + 1 if previous else 1
        name = replica_name(index, incarnation, lease=lease)
        log_path = self.workdir / f"{name}.log"
        if lease:
            process = self.scheduler(name, log_path, groups=[LEASE_GROUP], env=self.env(lease=True))
        else:
            process = self.scheduler(
                name,
                log_path,
                groups=self.session_groups,
                env=self.env(self.network.address(index)),
                prefix=self.network.prefix(index),
                extra=["--workers", str(WORKERS_PER_REPLICA)],
            )
        replica = Replica(
            index,
            incarnation,
            process,
            log_path,
            lease=lease,
            workers=0 if lease else WORKERS_PER_REPLICA,
        )
        self.replicas[index] = replica
        return replica

    def start_worker_node(self) -> Replica:
        """Start (or restart) the worker-only node: ``runworker --processes``, on the host."""
        previous = self.replicas.get(WORKER_NODE)
        incarnation = previous.incarnation + 1 if previous else 1
        name = replica_name(WORKER_NODE, incarnation, lease=False, worker_only=True)
        log_path = self.workdir / f"{name}.log"
        process = subprocess.Popen(
            [
                sys.executable,
                str(BASE_DIR / "manage.py"),
                "runworker",
                "--processes",
                str(WORKER_NODE_PROCESSES),
                "--node-name",
                name,
            ],
            cwd=BASE_DIR,
            env=self.env(),
            stdout=open(log_path, "wb"),  # noqa: SIM115 - owned by the child
            stderr=subprocess.STDOUT,
        )
        replica = Replica(
            WORKER_NODE,
            incarnation,
            process,
            log_path,
            worker_only=True,
            workers=WORKER_NODE_PROCESSES,
        )
        self.replicas[WORKER_NODE] = replica
        return replica

    def restart(self, replica: Replica) -> Replica:
        if replica.worker_only:
            return self.start_worker_node()
        return self.start_replica(replica.index, lease=replica.lease)

    def session_replicas(self) -> list[Replica]:
        return [
            r for r in self.replicas.values() if not r.lease and not r.worker_only and r.alive()
        ]

    def worker_targets(self) -> list[WorkerTarget]:
        """The live worker processes (children of the replicas and of the worker-only node),
        each with the run of a workers job it has in hand, in a stable order.

        A worker's pid comes from its ``Node`` row and counts only while it is a child of its
        replica's process (``/proc``), so a fault never signals a process the soak did not start.
        """
        parents = {r.name: r for r in self.replicas.values() if r.workers and r.alive()}
        if not parents:
            return []
        rows = self.query(
            "SELECT n.name, n.pid, (SELECT r.id FROM coordination_jobrun r"
            " WHERE r.node_instance = n.instance AND r.status = 'running' ORDER BY r.id DESC"
            " LIMIT 1) FROM coordination_node n WHERE n.role = 'worker' AND n.stopped_at IS NULL"
            " ORDER BY n.name"
        )
        jobs = dict(
            self.query(
                "SELECT id, job FROM coordination_jobrun WHERE status = 'running'"
                f" AND job IN ({placeholders(WORKER_JOBS)})",
                WORKER_JOBS,
            )
        )
        targets = []
        for name, pid, run_id in rows:
            parent = parents.get(name.rsplit("/worker-", 1)[0])
            if parent is not None and pid in child_pids(parent.process.pid):
                targets.append(WorkerTarget(name, pid, parent, run_id, jobs.get(run_id)))
        return targets

    def by_name(self, name: str | None) -> Replica | None:
        return next((r for r in self.replicas.values() if r.name == name), None)

    def kill(self, replica: Replica) -> None:
        replica.process.kill()
        replica.process.wait()
        replica.deliberately_stopped = True

    def terminate(self, replica: Replica, timeout: float) -> tuple[int | None, float]:
        """SIGTERM ``replica``; return its exit code (None: killed after ``timeout``) and time."""
        started = time.monotonic()
        replica.process.terminate()
        try:
            code = replica.process.wait(timeout)
        except subprocess.TimeoutExpired:
            replica.process.kill()
            replica.process.wait()
            code = None
        replica.deliberately_stopped = True
        return code, time.monotonic() - started

    # --- database helpers ------------------------------------------------------------
    def query(self, sql: str, params=()):
        return self.db.query(sql, params)

    def scalar(self, sql: str, params=()):
        return self.db.scalar(sql, params)

    def leader(self, group: str = "plugins") -> str | None:
        return self.scalar(
            f"SELECT node FROM coordination_leadership WHERE {self.db.q('group')} = %s", (group,)
        )

    @staticmethod
    def wait_until(ready: Callable[[], bool], *, since: float, timeout: float = 30):
        """Return seconds from ``since`` until ``ready()`` holds, or None after ``timeout``."""
        while time.monotonic() - since < timeout:
            if ready():
                return time.monotonic() - since
            time.sleep(0.05)
        return None

    def wait_new_leader(
        self, group: str, old: str | None, *, since: float, timeout: float = 30
    ) -> float | None:
        """Return seconds from ``since`` until a live node other than ``old`` leads ``group``."""

        def new_leader() -> bool:
            current = self.leader(group)
            replica = self.by_name(current)
            return bool(current and current != old and replica is not None and replica.alive())

        return self.wait_until(new_leader, since=since, timeout=timeout)

    def wait_for_runs_after(
        self, since_db, *, since: float, timeout: float = 30, job: str = "chaosapp.tx_tick"
    ) -> float | None:
        """Return seconds from ``since`` until the every-second ``job`` succeeds again."""
        return self.wait_until(
            lambda: bool(
                self.query(
                    "SELECT 1 FROM coordination_jobrun WHERE job = %s"
                    " AND status = 'succeeded' AND started_at > %s LIMIT 1",
                    (job, since_db),
                )
            ),
            since=since,
            timeout=timeout,
        )

    def ready_followers(self, group: str, besides: str) -> list[str]:
        """Return the live scheduler nodes that run ``group``, other than ``besides``: those
        that take its lock at once when its leader dies (a replica still starting is not
        among them until it registers)."""
        rows = self.query(
            "SELECT name, groups FROM coordination_node WHERE role = 'scheduler'"
            f" AND stopped_at IS NULL AND last_heartbeat >= {self.db.ago(LEASE)} AND name <> %s",
            (besides,),
        )
        return sorted(
            name
            for name, groups in rows
            if group in (json.loads(groups) if isinstance(groups, str) else groups)
        )

    def leader_since(self, group: str):
        """Return when ``group``'s leader took its lock (database time), or None."""
        return self.scalar(
            f"SELECT since FROM coordination_leadership WHERE {self.db.q('group')} = %s",
            (group,),
        )

    def db_now(self):
        return self.scalar(f"SELECT {self.db.now}")

    def measure_clock(self) -> None:
        """Note the database clock's offset from this process's, to place faults among posts."""
        before = time.time()
        now = db_epoch(self.db_now())
        self.clock_offset = now - (before + time.time()) / 2

    def local_time(self, value: datetime) -> float:
        """Return a time read from the database as epoch seconds of this process's clock."""
        return db_epoch(value) - self.clock_offset

    def request_run(self, job: str) -> bool:
        """Ask for a run now through the service the admin uses (Django runs in this process)."""
        from django.db import Error, connection

        from coordination.services import request_run

        for _ in range(20):
            try:
                return request_run(job, requested_by="chaos")
            except Error:
                time.sleep(0.2)
            finally:
                connection.close()  # a database restart must not leave it broken
        return False

    def wait_slow_run(self, timeout: float = 2 * JOBS[SLOW_JOB].period + 1) -> SlowRun | None:
        """Wait for a run of SLOW_JOB that started in the last 1.5 s on the plugins leader."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.query(
                "SELECT r.id, l.node, l.session_id FROM coordination_jobrun r"
                " JOIN coordination_leadership l ON l.node = r.node"
                f" AND l.{self.db.q('group')} = 'plugins'"
                f" WHERE r.job = %s AND r.status = 'running' AND r.started_at > {self.db.ago(1.5)}"
                " ORDER BY r.started_at DESC LIMIT 1",
                (SLOW_JOB,),
            )
            if rows:
                return SlowRun(*rows[0])
            time.sleep(0.05)
        return None

    def final_status(self, run_id: int, timeout: float = 8) -> str:
        """Return the status of ledger row ``run_id`` once it is no longer running (or after
        ``timeout``)."""
        status_sql = "SELECT status FROM coordination_jobrun WHERE id = %s"
        self.wait_until(
            lambda: self.scalar(status_sql, (run_id,)) != "running",
            since=time.monotonic(),
            timeout=timeout,
        )
        return self.scalar(status_sql, (run_id,)) or "gone"

    def lagging_jobs(self) -> dict[str, str]:
        """Return the unpaused chaos jobs whose next slot is not within one period of now()."""
        lagging = {}
        for name, next_due, now in self.query(
            f"SELECT name, next_due, {self.db.now} FROM coordination_jobstate"
            " WHERE name LIKE 'chaosapp.%%' AND NOT paused AND retired_at IS NULL"
        ):
            period = timedelta(seconds=JOBS[name].period) if name in JOBS else None
            if period is None:
                continue
            if next_due is None:
                lagging[name] = "no next slot"
            elif abs(next_due - now) > period:
                lagging[name] = f"next slot {(next_due - now).total_seconds():+.0f} s from now"
        return lagging


def child_pids(pid: int) -> set[int]:
    """Return the pids of ``pid``'s children: from ``/proc/PID/task/*/children`` where the
    kernel has it, else from each process's parent in ``/proc/*/stat``."""
    tasks = Path(f"/proc/{pid}/task")
    try:
        lists = [task / "children" for task in tasks.iterdir()]
        if lists and lists[0].exists():
            return {int(child) for path in lists for child in path.read_text().split()}
    except OSError:
        return set()  # it exited meanwhile
    return {row.pid for row in processes() if row.ppid == pid}
