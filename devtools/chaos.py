"""Chaos soak: run the real system under random faults, then check its invariants.

``make chaos`` (or ``python -m devtools.chaos --duration 600 --seed 1``) starts a throwaway
PostgreSQL (``--vendor postgresql-replicated``, what ``make chaos`` uses: a primary with a
synchronous hot standby; ``--vendor mariadb``: MariaDB), several ``runscheduler`` replicas, a web
process, a stream of editors scheduling, rescheduling and cancelling posts (with quiet spells:
everything postponed, then one lone post that only a wake-up of the leader gets out on time),
and jobs at several cadences (transactional, claim-first, one that sometimes fails, one that
sometimes hangs, one that works 3 s per run, one kept for catch-ups, and a probe that runs
every 10 s in the publishing group beside the publish jobs). Two more replicas run a group of
their own in lease lock mode (``INSTATIC_LOCK_MODE=transaction``), which must never share a group
with session locks (on MariaDB, which has no lease mode, they run it with ``GET_LOCK`` like the
others, and their SIGTERM fault times a MariaDB follower's and leader's exit).

Meanwhile it injects faults at random: SIGKILL, SIGSTOP then SIGCONT, SIGTERM and restart,
termination of the leader's database sessions, a database restart (PostgreSQL
``pg_ctl restart -m fast``, MariaDB ``mysqladmin shutdown`` and a start), a network partition
of one replica; run-now requests (sometimes followed by a SIGKILL of the leader); a catch-up of
1,800 slots; ``runscheduler --once`` next to the replicas; termination of only the leader's lock
session, and a database restart, while a slow claim-first run is in progress; a row lock held
on a due post; SIGTERM of a lease-mode replica; two faults at once (the follower first in line
for a group's lock frozen, then the group's leader SIGKILLed: the server grants the lock to the
frozen waiter); a SIGKILL of the leader while the slow claim-first job runs on it; and, with a
standby, a failover (the primary stopped with ``-m immediate``, the standby promoted, the old
primary rebuilt as the new standby).

Each replica lives in a network namespace this script creates, joined to the host by a veth
pair whose host end carries a private address the database listens on; a partition takes that
link down, so the replica's packets are silently dropped (no FIN, no RST) until it comes back.
Traffic only ever goes to loopback or to those namespaces. Without root (or ``ip netns``) the
partition fault is left out and reported as such.

Afterwards it checks, from the database and the logs, that no (job, slot) ran twice, the ledger
has every slot exactly once (a missed one with its reason), every due post was published exactly
once and none early, every post went live within LATE_BOUND of its time unless a fault explains
it, no cancelled post was published, every job is back on schedule soon after
the last fault, nothing spins (ledger rows per minute, "already claimed elsewhere" lines), no job
overlaps itself, every process not deliberately killed is running, stopped processes exit
as they should, a group whose leader died while its first waiter was frozen leads again within
the lease + 1 s, and a killed node's claim-first run is abandoned (its sessions gone) and its job
runs again within 1 s. It prints a table of faults (with the time until work resumed per fault kind:
a new leader, a served run-now request, a finished catch-up, a published post) and invariants,
and exits non-zero if any invariant broke. The same seed gives the same fault plan.
"""

import argparse
import bisect
import fcntl
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from devtools import chaos_databases
from devtools.chaos_databases import SoakDatabase, Unreachable, window_max

BASE_DIR = Path(__file__).resolve().parent.parent
LEASE = 3.0
HEARTBEAT = 0.5
SESSION_GROUPS = ("publishing", "plugins")  # what the session-lock replicas run
LEASE_GROUP = "chaoslease"  # run only by the lease-mode replicas (tests/chaosapp/jobs.py)
LEASE_REPLICAS = (101, 102)  # their indexes, apart from the session replicas' 1..5


@dataclass(frozen=True)
class ChaosJob:
    period: int  # seconds
    transactional: bool = False
    group: str = "plugins"


JOBS = {  # the periodic jobs of tests.chaosapp
    "chaosapp.tx_tick": ChaosJob(1, transactional=True),
    "chaosapp.claim_tick": ChaosJob(2),
    "chaosapp.flaky": ChaosJob(3, transactional=True),
    "chaosapp.hang": ChaosJob(5),
    "chaosapp.slow_claim": ChaosJob(4),
    "chaosapp.catchup": ChaosJob(1, transactional=True),
    "chaosapp.lease_tick": ChaosJob(1, transactional=True, group=LEASE_GROUP),
    "chaosapp.publish_probe": ChaosJob(10, transactional=True, group="publishing"),
}
PLUGIN_JOBS = [name for name, job in JOBS.items() if job.group == "plugins"]
CLAIM_FIRST_JOBS = [name for name in PLUGIN_JOBS if not JOBS[name].transactional]
TRANSACTIONAL_JOBS = [name for name, job in JOBS.items() if job.transactional]
SLOW_JOB = "chaosapp.slow_claim"  # claim first, then ~3 s without the database
CATCHUP_JOB = "chaosapp.catchup"
CATCHUP_BACK = timedelta(minutes=30)  # 1,800 slots: more than one catch-up batch of 1,000
MISSED_REASONS = ("downtime", "paused", "overlap", "plugin disabled", "catch-up window")
PROBE_JOB = "chaosapp.publish_probe"  # a periodic run in the publishing group (see quiet_spell)

# Bounds of the on-time invariant. A healthy leader publishes a due post within a tenth of a
# second. One that stops working for longer than LEASE is fenced and replaced within LEASE +
# HEARTBEAT (the documented worst-case takeover), so a post more than twice that late while no
# fault was near is a bug, not a slow machine (CI runs the soak beside other work on 2 cores).
# A lost wake-up leaves the leader asleep until its next planned tick: PROBE_JOB's next slot
# for a lone post (8.5-9.5 s late), INSTATIC_NOTIFY_MAX_TICK (30 s) with nothing else planned.
LATE_BOUND = 2 * (LEASE + HEARTBEAT)
RETRY_MAX = 5.0  # INSTATIC_DB_RETRY_MAX: a loop's longest back-off after a database error
# How long a fault's effect on publishing may outlast the fault: a loop still backing off from
# the database's errors, then a takeover and the new leader's first ticks.
FAULT_SLACK = RETRY_MAX + LATE_BOUND
# The faults that can leave the publishing group without a working leader for a while: each
# that stops, cuts off or fences a scheduler (its target may lead publishing whatever group it
# was picked for) and each database restart or failover; a run-now whose node was killed too.
# The others leave publishing alone (a row lock explains the lateness of its own post only).
PUBLISHING_DISRUPTIONS = frozenset(
    {
        "kill",
        "freeze",
        "term",
        "session",
        "partition",
        "pgrestart",
        "pgrestart-busy",
        "failover",
        "doublefault",
        "killrun",
    }
)
# A frozen waiter granted a dead leader's lock is removed once its heartbeat is a lease old:
# the group leads again within this long after the kill (the leadership row's time).
DOUBLE_FAULT_BOUND = LEASE + 1.0
# A killed node's claim-first run is abandoned (the server shows none of its sessions) and its
# job free again within this long after the kill.
KILLED_RUN_BOUND = 1.0
# The editors' quiet spells: busy editing for this long (s) between two of them.
QUIET_EVERY = (3.0, 6.0)
LONE_LEAD = 2.0  # a lone post goes to PROBE_JOB's first slot at least this far (s) ahead
SCHEDULE_AHEAD = 0.1  # a lone post's schedule starts this long (s) before its timed commit
POSTPONE_STEP = 0.05  # seconds between the posts a quiet spell postpones past the probe's slot

# Bounds of the no-spin invariants.
SPIN_SLACK = 5  # runs per minute above 1.2 x the schedule (catch-up and retried runs)
PUBLISH_MAX_PER_MINUTE = 240  # the editors make the publish job due about 3 times a second
ROWLOCK_MAX_RATE = 6.0  # publish runs per second while one due post is locked
CLAIMED_ELSEWHERE = "already claimed elsewhere"
CLAIMED_ELSEWHERE_PER_FAULT = 5
# Seconds for a lease-mode replica to stop on SIGTERM (no job running): from the signal to its
# "node ... stopped" line, which is what the scheduler controls. The process itself must then
# be gone (exit 0) within LEASE_TERM_WAIT; interpreter teardown on a starved CPU is not ours.
LEASE_TERM_MAX = 1.0
LEASE_TERM_WAIT = 5.0  # then it is killed, so a stuck one does not stall the soak
# Log lines of a ``--once`` process whose work a fault cut off (its exit code may be non-zero).
ONCE_CUT_OFF = re.compile(
    r"database unavailable|could not connect|server closed the connection|terminating connection"
    r"|connection (refused|failed|is closed)|OperationalError|InterfaceError|no longer leader"
    r"|lost advisory lock|Lost connection|gone away|Can't connect"
)
LOG_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def dead_running_sql(db: SoakDatabase) -> str:
    """Runs still marked running although their node is gone (stopped or silent past the lease)."""
    return (
        "SELECT count(*) FROM coordination_jobrun r WHERE status = 'running'"
        " AND job LIKE 'chaosapp.%%' AND NOT EXISTS (SELECT 1 FROM coordination_node n"
        " WHERE n.instance = r.node_instance AND n.stopped_at IS NULL"
        f" AND n.last_heartbeat > {db.ago(LEASE)})"
    )


def stuck_running_sql(db: SoakDatabase) -> str:
    """Runs running far longer than any chaos job can (their node forgot them)."""
    return (
        "SELECT count(*) FROM coordination_jobrun WHERE status = 'running'"
        f" AND job LIKE 'chaosapp.%%' AND started_at < {db.ago(30)}"
    )


def db_epoch(value: datetime) -> float:
    """Epoch seconds of a database time (MariaDB's are naive, in UTC like Django stores them)."""
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def clock_text(epoch: float) -> str:
    """``HH:MM:SS.s`` of an epoch time, as the soak's log lines show it."""
    return time.strftime("%H:%M:%S", time.localtime(epoch)) + f".{int(epoch % 1 * 10)}"


def log(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- network namespaces ------------------------------------------------------------------


class Network:
    """One namespace per replica, each joined to the host by a veth pair."""

    def __init__(self, count: int, tag: str):
        self.count = count
        self.tag = tag
        self.available = os.geteuid() == 0 and shutil.which("ip") is not None
        self.created: list[int] = []

    def ns(self, index: int) -> str:
        return f"ichaos{self.tag}{index}"

    def host_link(self, index: int) -> str:
        return f"ic{self.tag}{index}h"

    @staticmethod
    def host_address(index: int) -> str:
        return f"10.231.{index}.1"

    def _ip(self, *args: str, check: bool = True) -> None:
        subprocess.run(["ip", *args], check=check, capture_output=True)

    def create(self) -> None:
        if not self.available:
            return
        try:
            for i in range(1, self.count + 1):
                ns, host, peer = self.ns(i), self.host_link(i), f"ic{self.tag}{i}n"
                self._ip("netns", "add", ns)
                self.created.append(i)
                self._ip("link", "add", host, "type", "veth", "peer", "name", peer)
                self._ip("link", "set", peer, "netns", ns)
                self._ip("addr", "add", f"{self.host_address(i)}/24", "dev", host)
                self._ip("link", "set", host, "up")
                self._ip("-n", ns, "addr", "add", f"10.231.{i}.2/24", "dev", peer)
                self._ip("-n", ns, "link", "set", peer, "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
        except subprocess.CalledProcessError as exc:
            log(f"network namespaces unavailable ({exc.stderr.decode().strip()}); no partitions")
            self.destroy()
            self.available = False

    def prefix(self, index: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns(index)] if self.available else []

    def address(self, index: int) -> str:
        return self.host_address(index) if self.available else "127.0.0.1"

    def partition(self, index: int, down: bool) -> None:
        self._ip("link", "set", self.host_link(index), "down" if down else "up")

    def destroy(self) -> None:
        for i in self.created:
            self._ip("link", "del", self.host_link(i), check=False)
            self._ip("netns", "del", self.ns(i), check=False)
        self.created = []


# --- processes ---------------------------------------------------------------------------


@dataclass
class Replica:
    index: int
    incarnation: int
    process: subprocess.Popen
    log_path: Path
    lease: bool = False  # runs LEASE_GROUP in lease lock mode instead of the session groups
    deliberately_stopped: bool = False

    @property
    def name(self) -> str:
        return replica_name(self.index, self.incarnation, lease=self.lease)

    def alive(self) -> bool:
        return self.process.poll() is None


def replica_name(index: int, incarnation: int, *, lease: bool) -> str:
    return f"chaos-{'lease-' if lease else ''}{index}.{incarnation}"


@dataclass
class Fault:
    """One injected fault; ``takeover`` is the time until work resumed (None: it did not)."""

    kind: str
    target: str
    at: float = field(default_factory=time.monotonic)
    wall: float = field(default_factory=time.time)  # to match log lines to the fault
    ended: float | None = None
    takeover: float | None = None
    expects_takeover: bool = True
    note: str = ""
    problem: str = ""  # what went wrong, shown first in the table
    exit_code: int | None = None
    exit_seconds: float | None = None
    rate: float | None = None  # publish runs per second (rowlock)
    lead_gap: float | None = None  # seconds from the kill, database clock (doublefault, killrun)
    disrupts_publishing: bool = False  # may leave publishing leaderless (set by inject)
    post_id: int | None = None  # the post a rowlock held

    def skip(self, why: str) -> None:
        self.note = f"skipped: {why}"
        self.expects_takeover = False

    @property
    def skipped(self) -> bool:
        return self.note.startswith("skipped")

    def ended_wall(self) -> float:
        """When the fault's work ended (a takeover waited for, a process restarted), as epoch
        seconds like ``wall``."""
        return self.wall + ((self.ended or self.at) - self.at)


@dataclass
class OnceRun:
    """A ``runscheduler --once`` process, reaped when it exits."""

    fault: Fault
    process: subprocess.Popen
    log_path: Path


class SlowRun(NamedTuple):
    """A run of SLOW_JOB in progress on the plugins leader, with the leader's lock session."""

    id: int
    node: str
    lock_pid: int


@dataclass
class Soak:
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
    web_port: int = 0
    stop_stream: threading.Event = field(default_factory=threading.Event)
    editor_errors: int = 0
    editor_ops: Counter = field(default_factory=Counter)
    clock_offset: float = 0.0  # the database clock minus this process's (epoch seconds)
    # (slug, probe slot, seconds from the slot to the lone post's commit) of each quiet spell
    lone_commits: list = field(default_factory=list)

    def env(self, host: str = "127.0.0.1", *, lease: bool = False) -> dict:
        env = dict(os.environ)
        env.update(
            {
                "DATABASE_URL": self.db.url(host),
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
            }
        )
        if self.lease_mode(lease):
            # Lease mode renews only between ticks: coordination.E009 wants a tick under a
            # third of the lease.
            env["INSTATIC_MAX_TICK"] = str(LEASE / 6)
        return env

    def lease_mode(self, lease: bool) -> bool:
        """Lease lock mode is PostgreSQL's (behind PgBouncer); elsewhere LEASE_GROUP's replicas
        use the vendor's session lock like the others."""
        return lease and self.db.vendor == "postgresql"

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
                groups=SESSION_GROUPS,
                env=self.env(self.network.address(index)),
                prefix=self.network.prefix(index),
            )
        replica = Replica(index, incarnation, process, log_path, lease=lease)
        self.replicas[index] = replica
        return replica

    def restart(self, replica: Replica) -> Replica:
        return self.start_replica(replica.index, lease=replica.lease)

    def session_replicas(self) -> list[Replica]:
        return [r for r in self.replicas.values() if not r.lease and r.alive()]

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

    def wait_for_runs_after(self, since_db, *, since: float, timeout: float = 30) -> float | None:
        """Return seconds from ``since`` until the every-second job succeeds again."""
        return self.wait_until(
            lambda: bool(
                self.query(
                    "SELECT 1 FROM coordination_jobrun WHERE job = 'chaosapp.tx_tick'"
                    " AND status = 'succeeded' AND started_at > %s LIMIT 1",
                    (since_db,),
                )
            ),
            since=since,
            timeout=timeout,
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


# --- the editors' stream -------------------------------------------------------------------


def editor_stream(soak: Soak, seed: int) -> None:
    """Schedule, reschedule and cancel posts through the publishing services, continuously."""
    from django.db import close_old_connections, connection

    from coordination.clock import database_now
    from publishing import posts as services
    from publishing.models import Post, PostStatus

    rng = random.Random(seed)
    counter = 0
    lone = 0
    quiet_at = time.monotonic() + rng.uniform(*QUIET_EVERY)
    while not soak.stop_stream.is_set():
        if time.monotonic() >= quiet_at:
            lone += 1
            postponed_until = quiet_spell(soak, rng, f"chaos-{seed}-lone-{lone}")
            # The next spell would postpone the postponed posts again: they go live first.
            quiet_at = max(time.monotonic() + rng.uniform(*QUIET_EVERY), postponed_until + 0.5)
            continue
        try:
            close_old_connections()
            op = rng.choices(["schedule", "reschedule", "cancel"], weights=[6, 2, 2])[0]
            now = database_now()
            if op == "schedule":
                counter += 1
                post = Post.objects.create(
                    title=f"Chaos post {counter}", slug=f"chaos-{seed}-{counter}", body="Body."
                )
                services.schedule_post(
                    post=post, publish_at=now + timedelta(seconds=rng.uniform(1, 12)), user=None
                )
            else:
                candidates = list(
                    Post.objects.filter(status=PostStatus.SCHEDULED).values_list("pk", flat=True)[
                        :50
                    ]
                )
                if candidates:
                    post = Post.objects.get(pk=rng.choice(candidates))
                    if op == "reschedule":
                        services.reschedule_post(
                            post=post,
                            publish_at=now + timedelta(seconds=rng.uniform(1, 12)),
                            user=None,
                        )
                    else:
                        services.cancel_schedule(post=post, user=None)
            soak.editor_ops[op] += 1
        except Exception:
            # A racing publish, a restarting server: editors see an error and carry on.
            soak.editor_errors += 1
            try:
                connection.close()
            except Exception:
                pass
        soak.stop_stream.wait(rng.uniform(0.05, 0.4))
    connection.close()


def quiet_spell(soak: Soak, rng: random.Random, slug: str) -> float:
    """The editors postpone everything, then schedule one lone post as PROBE_JOB runs; return
    when (``time.monotonic``) the last postponed post is due.

    In the busy stream a new post is never the next one due (dozens are due sooner), so a lost
    wake-up costs a fraction of a second and nothing notices. Here nothing else is due before
    the probe's next slot (the other posts are postponed to just after it): the lone post goes
    live 0.5-1.5 s after a slot of PROBE_JOB, and its schedule commits (with its wake-up) as
    the probe's run starts: the leader has just read its jobs' state and checks its
    lock, and the run checks it again before it commits. A ``NOTIFY`` another query on the lock
    session read must still wake the leader: the probe's run ends as planned, which does not
    make the leader plan again, so if the wake-up is lost the post waits for the probe's next
    slot. The spell lasts until the post is live (at most a probe period and a bit), so the
    editors' next wake-ups cannot hide a late one.
    """
    from django.db import close_old_connections, connection, transaction

    from publishing import posts as services
    from publishing.models import Post, PostStatus

    live_after = timedelta(seconds=rng.uniform(0.5, 1.5))
    jitter = rng.uniform(-0.005, 0.015)
    period = JOBS[PROBE_JOB].period
    postponed_until = time.monotonic()
    try:
        close_old_connections()
        post = Post.objects.create(title=f"Chaos lone post {slug}", slug=slug, body="Body.")
        slot, ready = next_probe_slot()
        count = postpone_all(soak, slot + timedelta(seconds=period + 0.5))
        postponed_until = ready + period + 0.5 + POSTPONE_STEP * count
        # Commit as the probe's run starts (its recent runs' lag behind their slots): within
        # about 15 ms of that a wake-up went missing (measured). Scheduling takes 10-80 ms on
        # a busy machine, so it is done just before, and only the commit is timed.
        commit_at = ready + probe_start_lag() + jitter
        if soak.stop_stream.wait(max(0.0, commit_at - SCHEDULE_AHEAD - time.monotonic())):
            return postponed_until
        with transaction.atomic():
            services.schedule_post(post=post, publish_at=slot + live_after, user=None)
            soak.stop_stream.wait(max(0.0, commit_at - time.monotonic()))
        soak.lone_commits.append((slug, slot, time.monotonic() - ready))
        soak.editor_ops["lone post"] += 1
        deadline = time.monotonic() + live_after.total_seconds() + period + 3
        while time.monotonic() < deadline and not soak.stop_stream.is_set():
            if Post.objects.filter(pk=post.pk, status=PostStatus.PUBLISHED).exists():
                break
            soak.stop_stream.wait(0.1)
    except Exception:
        soak.editor_errors += 1
        connection.close()
    return postponed_until


def postpone_all(soak: Soak, until: datetime) -> int:
    """Reschedule every scheduled post to ``until`` and after, POSTPONE_STEP apart, one at a
    time as editors would (errors are counted); return how many there were."""
    from django.db import connection

    from publishing import posts as services
    from publishing.models import Post, PostStatus

    scheduled = list(Post.objects.filter(status=PostStatus.SCHEDULED).values_list("pk", flat=True))
    for i, pk in enumerate(scheduled):
        try:
            post = Post.objects.get(pk=pk)
            at = until + timedelta(seconds=POSTPONE_STEP * i)
            services.reschedule_post(post=post, publish_at=at, user=None)
            soak.editor_ops["postpone"] += 1
        except Exception:
            soak.editor_errors += 1
            connection.close()
    return len(scheduled)


def probe_start_lag() -> float:
    """Median seconds from PROBE_JOB's last few slots to their runs' start (when the leader
    has read its jobs' state and checked its lock), 0.03 s before it has run."""
    from coordination.models import JobRun

    rows = (
        JobRun.objects.filter(job=PROBE_JOB, trigger=JobRun.Trigger.SCHEDULE)
        .exclude(started_at=None)
        .order_by("-slot")
        .values_list("slot", "started_at")[:5]
    )
    lags = sorted((started - slot).total_seconds() for slot, started in rows)
    lags = [lag for lag in lags if 0 <= lag < 1]  # not a catch-up after a fault
    return lags[len(lags) // 2] if lags else 0.03


def next_probe_slot() -> tuple[datetime, float]:
    """Return PROBE_JOB's first slot at least LONE_LEAD s ahead and when (``time.monotonic``)
    it comes (a slot LONE_LEAD s from now if its state is missing or far off)."""
    from coordination.clock import database_now
    from coordination.models import JobState

    period = timedelta(seconds=JOBS[PROBE_JOB].period)
    lead = timedelta(seconds=LONE_LEAD)
    slot = JobState.objects.filter(name=PROBE_JOB).values_list("next_due", flat=True).first()
    now = database_now()
    read = time.monotonic()
    if slot is None or slot - now > period + lead:
        slot = now + lead
    while slot - now < lead:
        slot += period
    return slot, read + (slot - now).total_seconds()


# --- faults ------------------------------------------------------------------------------
# Each fault draws its random numbers before it looks at the system, so the seed alone decides
# the plan; what the system does in between cannot shift later faults' draws.


def new_fault(soak: Soak, kind: str, target: str, context: str = "") -> Fault:
    log(f"fault {kind} -> {target}" + (f" ({context})" if context else ""))
    return Fault(kind, target)


def pick_leader(soak: Soak) -> tuple[str, str | None, Replica]:
    """Return a random session group, its leader's name, and that replica (or a live one)."""
    group = "plugins" if soak.rng.random() < 0.5 else "publishing"
    fallback = soak.rng.choice(soak.session_replicas())
    leader_name = soak.leader(group)
    leader = soak.by_name(leader_name)
    if leader is None or leader.lease or not leader.alive():
        leader = fallback
    return group, leader_name, leader


def leader_fault(soak: Soak, kind: str) -> tuple[Fault, str, Replica]:
    group, leader_name, leader = pick_leader(soak)
    return new_fault(soak, kind, leader.name, f"{group} leader {leader_name}"), group, leader


def fault_kill(soak: Soak) -> Fault:
    fault, group, leader = leader_fault(soak, "kill")
    soak.kill(leader)
    fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
    soak.restart(leader)
    return fault


def fault_term(soak: Soak) -> Fault:
    fault, group, leader = leader_fault(soak, "term")
    fault.exit_code, fault.exit_seconds = soak.terminate(leader, timeout=30)
    fault.note = f"exit {fault.exit_code}"
    if fault.exit_code != 0:
        fault.problem = f"exit {fault.exit_code} (expected 0)"
    fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
    soak.restart(leader)
    return fault


def fault_freeze(soak: Soak) -> Fault:
    frozen_for = soak.rng.uniform(0.5, 2.0)
    fault, group, leader = leader_fault(soak, "freeze")
    leader.process.send_signal(signal.SIGSTOP)
    fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
    time.sleep(frozen_for)
    leader.process.send_signal(signal.SIGCONT)
    return fault


def fault_session(soak: Soak) -> Fault:
    fault, _, leader = leader_fault(soak, "session")
    ended = soak.db.end_lock_sessions(leader.name)
    fault.note = f"{ended} session(s) ended"
    fault.takeover = soak.wait_for_runs_after(soak.db_now(), since=fault.at)
    return fault


def restart_database(soak: Soak, fault: Fault) -> None:
    soak.db.restart()
    fault.takeover = soak.wait_for_runs_after(soak.db_now(), since=fault.at)


def fault_pgrestart(soak: Soak) -> Fault:
    """Restart the database server (the kind keeps its historical name on every vendor)."""
    fault = new_fault(soak, "pgrestart", soak.db.vendor)
    restart_database(soak, fault)
    return fault


def fault_failover(soak: Soak) -> Fault:
    """Fail the primary over to its synchronous standby, then rebuild the old one as standby.

    The primary stops with ``-m immediate`` mid-work; advisory locks die with it, and the
    nodes must find the promoted standby through their multi-host URL by themselves. The
    takeover is the time until the every-second job succeeds on the new primary.
    """
    fault = new_fault(soak, "failover", f"{soak.db.vendor} primary")
    soak.db.fail_over()
    fault.takeover = soak.wait_for_runs_after(soak.db_now(), since=fault.at)
    soak.db.rebuild()
    fault.note = "old primary rebuilt as the standby"
    return fault


def fault_partition(soak: Soak) -> Fault:
    cut_for = soak.rng.uniform(1.0, 3.0)
    fault, group, leader = leader_fault(soak, "partition")
    if not soak.network.available:
        fault.skip("no network namespaces")
        return fault
    soak.network.partition(leader.index, down=True)
    fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
    time.sleep(cut_for)
    soak.network.partition(leader.index, down=False)
    return fault


def fault_runnow(soak: Soak) -> Fault:
    """Run now on a job, mostly a claim-first one.

    Every other time (the first included) it SIGKILLs the node that claimed the manual run of
    a claim-first job that takes a while, 0-0.2 s after the claim, so mid-run: its ledger row
    stays ``running`` and the request must still count as served. The takeover is the time
    until the request is served (``run_requested_at`` cleared).
    """
    rng = soak.rng
    kill = sum(1 for f in soak.faults if f.kind == "runnow") % 2 == 0
    if kill:
        job = rng.choice([SLOW_JOB, "chaosapp.claim_tick"])
    else:
        job = rng.choice(CLAIM_FIRST_JOBS if rng.random() < 0.7 else PLUGIN_JOBS)
    kill_after = rng.uniform(0.0, 0.2)
    fault = new_fault(soak, "runnow", job, "then SIGKILL its node" if kill else "")
    asked_at = soak.db_now()
    if not soak.request_run(job):
        fault.skip("no job state")
        return fault
    soak.run_requests[job] += 1
    if kill:
        fault.note = kill_manual_runner(soak, job, asked_at, kill_after)
        fault.disrupts_publishing = fault.note.startswith("its node killed")
    fault.takeover = soak.wait_until(
        lambda: soak.scalar(
            "SELECT run_requested_at IS NULL FROM coordination_jobstate WHERE name = %s", (job,)
        ),
        since=fault.at,
        timeout=10,
    )
    if fault.takeover is None:
        fault.problem = f"{job} run-now not served in 10 s"
    return fault


def kill_manual_runner(soak: Soak, job: str, asked_at, kill_after: float) -> str:
    """SIGKILL (and restart) the replica that claimed the manual run of ``job``; say what
    happened."""
    node_sql = (
        f"SELECT node FROM coordination_jobrun WHERE job = %s AND {soak.db.q('trigger')}"
        " = 'manual' AND slot >= %s ORDER BY slot LIMIT 1"
    )
    claimed = soak.wait_until(
        lambda: soak.scalar(node_sql, (job, asked_at)) is not None,
        since=time.monotonic(),
        timeout=6,
    )
    if claimed is None:
        return "manual run not claimed in 6 s; nothing killed"
    time.sleep(kill_after)
    replica = soak.by_name(soak.scalar(node_sql, (job, asked_at)))
    if replica is None or not replica.alive():
        return "its node was gone already"
    soak.kill(replica)
    soak.restart(replica)
    return f"its node killed {kill_after:.2f} s after the claim"


def fault_catchup(soak: Soak) -> Fault:
    """Move CATCHUP_JOB's next slot 30 minutes before its first ledger row (a long pause).

    The takeover is the time until its next slot is back within a period of now.
    """
    fault = new_fault(soak, "catchup", CATCHUP_JOB)
    db = soak.db
    rows = soak.query(
        f"SELECT LEAST(s.next_due, COALESCE((SELECT min(slot) FROM coordination_jobrun"
        f" WHERE job = %(job)s AND {db.q('trigger')} <> 'manual'), s.next_due)), {db.now}"
        " FROM coordination_jobstate s WHERE s.name = %(job)s",
        {"job": CATCHUP_JOB},
    )
    if not rows or rows[0][0] is None:
        fault.skip("no job state")
        return fault
    next_due, now = rows[0][0] - CATCHUP_BACK, rows[0][1]
    # The move is a write the engine does not expect: a run planned before it and committed
    # after it sets the job's next slot as planned, and the move is gone without a trace
    # (no product path moves a next slot backwards under a running job). So move it again
    # until the engine has taken it: its first slot is in the ledger. Only then does the
    # ledger invariant hold the engine to the slots from there.
    accepted = soak.wait_until(
        lambda: _moved_back(soak, next_due), since=time.monotonic(), timeout=10
    )
    if accepted is None:
        fault.skip("every move back was overwritten by a run in flight")
        return fault
    soak.catchup_from = min(next_due, soak.catchup_from or next_due)
    fault.note = f"{(now - next_due).total_seconds():.0f} slots behind"
    fault.takeover = soak.wait_until(
        lambda: CATCHUP_JOB not in soak.lagging_jobs(), since=fault.at, timeout=10
    )
    if fault.takeover is None:
        fault.problem = f"still behind after 10 s: {soak.lagging_jobs().get(CATCHUP_JOB)}"
    return fault


def _moved_back(soak: Soak, slot: datetime) -> bool:
    """Whether the engine has recorded ``slot`` for CATCHUP_JOB; if not, move its state there."""
    if soak.query(
        "SELECT 1 FROM coordination_jobrun WHERE job = %(job)s AND slot = %(slot)s",
        {"job": CATCHUP_JOB, "slot": slot},
    ):
        return True
    soak.query(
        "UPDATE coordination_jobstate SET next_due = LEAST(next_due, %(back)s)"
        " WHERE name = %(job)s",
        {"job": CATCHUP_JOB, "back": slot},
    )
    return False


def fault_once(soak: Soak) -> Fault:
    """Start ``runscheduler --once`` next to the replicas; it is reaped (exit code) later."""
    name = f"chaos-once-{len(soak.once_runs) + 1}"
    fault = new_fault(soak, "once", name)
    fault.expects_takeover = False
    log_path = soak.workdir / f"{name}.log"
    process = soak.scheduler(
        name, log_path, groups=SESSION_GROUPS, env=soak.env(), extra=["--once"]
    )
    soak.once_runs.append(OnceRun(fault, process, log_path))
    fault.note = "running"
    return fault


def reap_once(soak: Soak, *, wait: float = 0.0) -> None:
    """Record the exit of finished ``--once`` processes (waiting up to ``wait`` s for each)."""
    deadline = time.monotonic() + wait
    for run in soak.once_runs:
        if run.fault.exit_code is not None or run.fault.problem:
            continue
        try:
            code = run.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            if wait:
                run.process.kill()
                run.fault.problem = f"still running {wait:.0f} s after the soak; killed"
            continue
        cut_off = ONCE_CUT_OFF.search(run.log_path.read_text(errors="replace"))
        run.fault.exit_code = code
        run.fault.note = f"exit {code}" + (" (work cut off)" if cut_off else "")
        if code != 0 and not cut_off:
            run.fault.problem = f"exit {code} without being cut off"


def fault_lockonly(soak: Soak) -> Fault:
    """End only the plugins leader's lock session while the slow claim-first job runs on it."""
    pause = soak.rng.uniform(0.0, 1.0)
    run = soak.wait_slow_run()
    if run is None:
        fault = new_fault(soak, "lockonly", "-")
        fault.skip(f"{SLOW_JOB} not running on the plugins leader")
        return fault
    time.sleep(pause)
    fault = new_fault(soak, "lockonly", run.node, f"{SLOW_JOB} run {run.id}")
    ended = soak.db.end_lock_sessions(run.node, run.lock_pid)
    # The same node may take the lock straight back, so "resumed" is the next run, not a leader.
    fault.takeover = soak.wait_for_runs_after(soak.db_now(), since=fault.at)
    fault.note = f"{ended} session ended; slow run {soak.final_status(run.id)}"
    return fault


def fault_doublefault(soak: Soak) -> Fault:
    """Freeze the follower first in line for a group's lock, then SIGKILL the group's leader.

    The server grants the dead leader's lock to the frozen waiter, which cannot write its
    leadership row; another follower must find the holder in the server and fence it. The
    takeover is the time until a third node leads; the bound is checked on the database's
    times (the new leadership row's ``since`` against the kill).
    """
    frozen_extra = soak.rng.uniform(0.2, 1.0)
    group, leader_name, leader = pick_leader(soak)
    from coordination.conf import settings
    from coordination.keys import normalize_key

    waiter = soak.by_name(soak.db.first_lock_waiter(normalize_key(settings.group_key(group))))
    fault = new_fault(
        soak,
        "doublefault",
        leader.name,
        f"{group} leader {leader_name}, first waiter {waiter.name if waiter else None} frozen",
    )
    if leader.name != leader_name or waiter is None or waiter is leader or not waiter.alive():
        fault.skip(f"no leader of {group} with a waiting follower")
        return fault
    waiter.process.send_signal(signal.SIGSTOP)
    killed_db = soak.db_now()
    soak.kill(leader)

    def third_node_leads() -> bool:
        current = soak.by_name(soak.leader(group))
        return current is not None and current not in (leader, waiter) and current.alive()

    fault.takeover = soak.wait_until(third_node_leads, since=fault.at, timeout=30)
    since = soak.scalar(
        f"SELECT since FROM coordination_leadership WHERE {soak.db.q('group')} = %s", (group,)
    )
    if fault.takeover is None or since is None:
        fault.problem = f"{group} did not lead again within 30 s"
    else:
        fault.lead_gap = (since - killed_db).total_seconds()
        fault.note = f"led again {fault.lead_gap:.2f} s after the kill"
        if fault.lead_gap > DOUBLE_FAULT_BOUND:
            fault.problem = f"{group} led again {fault.lead_gap:.2f} s after the kill"
    time.sleep(frozen_extra)
    waiter.process.send_signal(signal.SIGCONT)
    soak.restart(leader)
    return fault


def fault_killrun(soak: Soak) -> Fault:
    """SIGKILL the plugins leader while the slow claim-first job runs on it.

    The killed process's sessions end with it, so the new leader must abandon the run at once
    (not a lease later) and the job's next slot must start on time. The takeover is the time
    until the run's row is no longer ``running``; the bounds are checked on the database's
    times.
    """
    from coordination.ledger import VANISHED_REASON

    pause = soak.rng.uniform(0.0, 1.0)
    run = soak.wait_slow_run()
    replica = soak.by_name(run.node) if run else None
    if run is None or replica is None or not replica.alive():
        fault = new_fault(soak, "killrun", "-")
        fault.skip(f"{SLOW_JOB} not running on the plugins leader")
        return fault
    time.sleep(pause)
    fault = new_fault(soak, "killrun", run.node, f"{SLOW_JOB} run {run.id}")
    killed_db = soak.db_now()
    soak.kill(replica)
    row_sql = "SELECT status, error, finished_at, slot FROM coordination_jobrun WHERE id = %s"
    fault.takeover = soak.wait_until(
        lambda: soak.query(row_sql, (run.id,))[0][0] != "running", since=fault.at, timeout=15
    )
    status, error, finished_at, slot = soak.query(row_sql, (run.id,))[0]
    if status != "abandoned" and finished_at is not None and finished_at <= killed_db:
        fault.note = f"run {run.id} ended ({status}) before the kill"
    elif status == "abandoned" and error != VANISHED_REASON and (why := left_to_lease(soak, run)):
        # By design: its heartbeat was already half a lease old (a starved process), which
        # does not prove it gone. Then the lease bounds it, as before.
        fault.note = f"left to the lease ({why})"
        gap = (finished_at - killed_db).total_seconds()
        if gap > LEASE + 2 * HEARTBEAT + 1:
            fault.problem = f"run {run.id} abandoned {gap:.2f} s after the kill"
    elif status != "abandoned" or error != VANISHED_REASON or finished_at is None:
        fault.problem = f"run {run.id} {status} ({error or 'no error'}), not abandoned at once"
    else:
        fault.lead_gap = (finished_at - killed_db).total_seconds()
        fault.note = f"abandoned {fault.lead_gap:.2f} s after the kill"
        if fault.lead_gap > KILLED_RUN_BOUND:
            fault.problem = f"run {run.id} abandoned {fault.lead_gap:.2f} s after the kill"
        else:
            next_sql = (
                "SELECT slot, started_at FROM coordination_jobrun WHERE job = %s AND slot > %s"
                " AND started_at IS NOT NULL ORDER BY slot LIMIT 1"
            )
            soak.wait_until(
                lambda: bool(soak.query(next_sql, (SLOW_JOB, slot))),
                since=time.monotonic(),
                timeout=2 * JOBS[SLOW_JOB].period + 1,
            )
            rows = soak.query(next_sql, (SLOW_JOB, slot))
            if not rows:
                fault.problem = f"{SLOW_JOB} did not run again"
            else:
                late = (rows[0][1] - max(rows[0][0], killed_db)).total_seconds()
                fault.note += f"; next run {late:.2f} s after its slot"
                if late > KILLED_RUN_BOUND:
                    fault.problem = f"{SLOW_JOB}'s next run started {late:.2f} s late"
    soak.restart(replica)
    return fault


def left_to_lease(soak: Soak, run: SlowRun) -> str:
    """Return why a leader left ``run``'s node to its lease when the reason is its heartbeat's
    age (the fast path's design: no proof of death), from the replicas' logs; else ""."""
    pattern = re.compile(
        rf"node {re.escape(run.node)} may still be running its runs \((heartbeat [\d.]+s old,"
        r" lease [\d.]+s; no session)\)"
    )
    for replica in soak.replicas.values():
        for line in replica.log_path.read_text(errors="replace").splitlines():
            found = pattern.search(line)
            if found:
                age, lease = re.findall(r"[\d.]+(?=s)", found[1])[:2]
                if float(age) >= float(lease) / 2:
                    return found[1]
    return ""


def fault_pgrestart_busy(soak: Soak) -> Fault:
    """Restart the database while the slow claim-first job does its non-database work."""
    pause = soak.rng.uniform(0.0, 1.0)
    run = soak.wait_slow_run()
    if run is None:
        fault = new_fault(soak, "pgrestart-busy", soak.db.vendor)
        fault.skip(f"{SLOW_JOB} not running")
        return fault
    time.sleep(pause)
    fault = new_fault(soak, "pgrestart-busy", soak.db.vendor, f"{SLOW_JOB} run {run.id}")
    restart_database(soak, fault)
    fault.note = f"slow run {soak.final_status(run.id)}"
    return fault


def fault_rowlock(soak: Soak) -> Fault:
    """Hold a row lock on a due scheduled post for a few seconds past its time.

    The publish job skips locked rows; it must neither spin on the one it cannot take (the rate
    of its ledger rows while the post is due and locked is recorded) nor forget it afterwards
    (the takeover is the time from the release until the post is published).
    """
    hold = soak.rng.uniform(2.0, 4.0)
    fault = new_fault(soak, "rowlock", "publishing_post")
    db = soak.db
    try:
        conn = db.connect(autocommit=False)
        try:
            cursor = conn.cursor()
            locked = lock_due_post(db, conn, cursor)
            if locked is None:
                fault.skip("no post due soon")
                return fault
            post_id, publish_at, now = locked
            fault.target = f"post {post_id}"
            fault.post_id = post_id
            time.sleep(max(0.0, (publish_at - now).total_seconds()) + hold)
            cursor.execute(f"SELECT {db.clock}")
            released_at = cursor.fetchone()[0]
            conn.rollback()
        finally:
            conn.close()
    except (Unreachable, *db.errors) as exc:
        fault.skip(f"database error: {exc}")
        return fault
    released = time.monotonic()
    due_from = max(publish_at, now)
    runs = soak.scalar(
        "SELECT count(*) FROM coordination_jobrun WHERE job = %s AND started_at >= %s"
        " AND started_at <= %s",
        (soak.publish_job, due_from, released_at),
    )
    window = max(0.5, (released_at - due_from).total_seconds())
    fault.rate = runs / window
    fault.note = f"{runs} publish runs in {window:.1f} s locked"
    if fault.rate > ROWLOCK_MAX_RATE:
        fault.problem = f"{fault.rate:.0f} publish runs/s while post {post_id} was locked"
    publish_time = soak.wait_until(
        lambda: (
            not soak.scalar(
                "SELECT count(*) FROM publishing_post WHERE id = %s AND status = 'scheduled'"
                f" AND publish_at <= {db.now}",
                (post_id,),
            )
        ),
        since=released,
        timeout=10,
    )
    fault.takeover = None if publish_time is None else released - fault.at + publish_time
    if publish_time is None:
        fault.problem = f"post {post_id} still unpublished 10 s after the lock was released"
    return fault


def lock_due_post(db: SoakDatabase, conn, cursor, timeout: float = 5.0):
    """Lock a scheduled post due within 2 s; return (id, publish_at, now) or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cursor.execute(
            f"SELECT id, publish_at, {db.clock} FROM publishing_post"
            f" WHERE status = 'scheduled' AND publish_at <= {db.later(2)}"
            " ORDER BY publish_at DESC LIMIT 1 FOR UPDATE SKIP LOCKED"
        )
        row = cursor.fetchone()
        if row is not None:
            return row
        conn.rollback()  # a new transaction, so now() moves on
        time.sleep(0.1)
    return None


def fault_leaseterm(soak: Soak) -> Fault:
    """SIGTERM a lease-mode replica, follower and leader in turn; time its exit; restart it."""
    want_leader = sum(1 for f in soak.faults if f.kind == "leaseterm") % 2 == 1
    leader = soak.leader(LEASE_GROUP)
    lease_replicas = [soak.replicas[i] for i in LEASE_REPLICAS]
    replica = next(
        (r for r in lease_replicas if (r.name == leader) == want_leader), lease_replicas[0]
    )
    role = "leader" if replica.name == leader else "follower"
    # Before it registers it has no signal handler yet, and would die of the signal.
    soak.wait_until(
        lambda: soak.scalar(
            "SELECT count(*) FROM coordination_node WHERE name = %s", (replica.name,)
        ),
        since=time.monotonic(),
        timeout=10,
    )
    fault = new_fault(soak, "leaseterm", replica.name, role)
    if not replica.alive():
        fault.problem = f"{replica.name} had already exited ({replica.process.returncode})"
    sent = time.time()
    fault.exit_code, exited = soak.terminate(replica, timeout=LEASE_TERM_WAIT)
    fault.exit_seconds = stopped_line_after(replica, sent)
    fault.note = (
        f"{role} stopped in {fault.exit_seconds:.2f} s, exit {fault.exit_code} in {exited:.2f} s"
        if fault.exit_seconds is not None
        else f"{role} exit {fault.exit_code} in {exited:.2f} s"
    )
    if fault.exit_code is None:
        fault.problem = fault.problem or f"{role} still running after {LEASE_TERM_WAIT:.0f} s"
    elif fault.exit_code != 0:
        fault.problem = fault.problem or f"{role} exit {fault.exit_code}"
    elif fault.exit_seconds is None or fault.exit_seconds > LEASE_TERM_MAX:
        fault.problem = fault.problem or (
            f"{role} took {fault.exit_seconds:.1f} s to stop"
            if fault.exit_seconds is not None
            else f"{role} never logged that it stopped"
        )
    if role == "leader":
        fault.takeover = soak.wait_new_leader(LEASE_GROUP, replica.name, since=fault.at)
    else:
        fault.expects_takeover = False
    soak.restart(replica)
    return fault


def stopped_line_after(replica: Replica, sent: float) -> float | None:
    """Seconds from ``sent`` (epoch) to the replica's "node ... stopped" log line, or None."""
    for line in reversed(replica.log_path.read_text(errors="replace").splitlines()):
        if f"node {replica.name} stopped" in line:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            return time.mktime(stamp.timetuple()) + stamp.microsecond / 1e6 - sent
    return None


FAULTS: dict[str, Callable[[Soak], Fault]] = {
    "kill": fault_kill,
    "freeze": fault_freeze,
    "term": fault_term,
    "session": fault_session,
    "pgrestart": fault_pgrestart,
    "partition": fault_partition,
    "runnow": fault_runnow,
    "catchup": fault_catchup,
    "once": fault_once,
    "lockonly": fault_lockonly,
    "rowlock": fault_rowlock,
    "pgrestart-busy": fault_pgrestart_busy,
    "leaseterm": fault_leaseterm,
    "failover": fault_failover,
    "doublefault": fault_doublefault,
    "killrun": fault_killrun,
}
FAULT_KINDS = list(FAULTS)


def fault_kinds(db) -> list[str]:
    """The faults that apply to this database (a failover needs a standby)."""
    return [kind for kind in FAULT_KINDS if kind != "failover" or db.can_fail_over]


def inject(soak: Soak, kind: str) -> Fault:
    fault = FAULTS[kind](soak)
    fault.ended = time.monotonic()
    if kind in PUBLISHING_DISRUPTIONS and not fault.skipped:
        fault.disrupts_publishing = True
    return fault


# --- invariants --------------------------------------------------------------------------
# Each check returns (held, detail) from the database, the logs and the faults' records.

CHAOS_OR_PUBLISH = "(job LIKE 'chaosapp.%%' OR job = %(publish)s)"


def placeholders(values, name: str = "") -> str:
    """Return ``%s, %s, ...`` (or ``%(name0)s, ...``) for an IN list both vendors accept."""
    if name:
        return ", ".join(f"%({name}{i})s" for i in range(len(values)))
    return ", ".join(["%s"] * len(values))


def no_slot_twice(soak: Soak, end_db) -> tuple[bool, str]:
    twice = soak.query(
        "SELECT job, slot, count(*) FROM jobsapp_effect WHERE job LIKE 'chaosapp.%%'"
        " GROUP BY job, slot HAVING count(*) > 1"
    )
    return not twice, f"{len(twice)} doubled"


def effects_match_runs(soak: Soak, end_db) -> tuple[bool, str]:
    orphans = soak.scalar(
        f"SELECT count(*) FROM jobsapp_effect e WHERE e.job IN ({placeholders(TRANSACTIONAL_JOBS)})"
        " AND NOT EXISTS (SELECT 1 FROM coordination_jobrun r WHERE r.job = e.job"
        " AND r.slot = e.slot AND r.status = 'succeeded')",
        TRANSACTIONAL_JOBS,
    )
    return orphans == 0, f"{orphans} without a run"


def ledger_complete(soak: Soak, end_db) -> tuple[bool, str]:
    """Every slot between a job's first and last scheduled row is there once; missed has why.

    Manual runs (run now) are at the instant they were asked for, off the schedule's grid.
    """
    gaps = []
    for job, spec in JOBS.items():
        slots = [
            row[0]
            for row in soak.query(
                "SELECT slot FROM coordination_jobrun WHERE job = %s"
                f" AND {soak.db.q('trigger')} <> 'manual' ORDER BY slot",
                (job,),
            )
        ]
        for a, b in zip(slots, slots[1:], strict=False):
            if b - a != timedelta(seconds=spec.period):
                gaps.append(f"{job} {a:%H:%M:%S}->{b:%H:%M:%S}")
        # A catch-up must not lose the slots before its job's first row, either.
        if job == CATCHUP_JOB and soak.catchup_from and slots and slots[0] > soak.catchup_from:
            gaps.append(f"{job} {soak.catchup_from:%H:%M:%S}->{slots[0]:%H:%M:%S} (catch-up)")
    unexplained = soak.query(
        f"SELECT job, reason, count(*) FROM coordination_jobrun WHERE {CHAOS_OR_PUBLISH}"
        f" AND status = 'missed' AND reason NOT IN ({placeholders(MISSED_REASONS, 'r')})"
        " GROUP BY job, reason",
        {"publish": soak.publish_job, **{f"r{i}": r for i, r in enumerate(MISSED_REASONS)}},
    )
    missed = soak.scalar(
        "SELECT count(*) FROM coordination_jobrun WHERE job LIKE 'chaosapp.%%'"
        " AND status = 'missed'"
    )
    detail = f"{len(gaps)} gaps" + (f": {gaps[:3]}" if gaps else "") + f"; {missed} missed"
    if unexplained:
        detail += ", without a valid reason: " + ", ".join(
            f"{job} {n} ({reason or 'empty'!r})" for job, reason, n in unexplained[:3]
        )
    return not gaps and not unexplained, detail


def no_run_left_running(soak: Soak, end_db) -> tuple[bool, str]:
    dead, stuck = soak.scalar(dead_running_sql(soak.db)), soak.scalar(stuck_running_sql(soak.db))
    return dead == 0 and stuck == 0, f"{dead} of dead nodes, {stuck} running > 30 s"


def posts_published_once(soak: Soak, end_db) -> tuple[bool, str]:
    q = soak.scalar
    unpublished = q(
        "SELECT count(*) FROM publishing_post WHERE status = 'scheduled'"
        " AND publish_at < %s AND last_error = ''",
        (end_db,),
    )
    doubles = q(
        "SELECT count(*) FROM (SELECT post_id FROM publishing_publishevent WHERE kind ="
        " 'published' GROUP BY post_id HAVING count(*) > 1) d"
    )
    without_event = q(
        "SELECT count(*) FROM publishing_post p WHERE status = 'published' AND NOT EXISTS"
        " (SELECT 1 FROM publishing_publishevent e WHERE e.post_id = p.id"
        " AND e.kind = 'published')"
    )
    total = q("SELECT count(*) FROM publishing_post WHERE status = 'published'")
    return (
        unpublished == 0 and doubles == 0 and without_event == 0,
        f"{total} published; {unpublished} overdue, {doubles} twice",
    )


def no_cancelled_published(soak: Soak, end_db) -> tuple[bool, str]:
    out = soak.scalar(
        "SELECT count(*) FROM publishing_post p WHERE status = 'draft' AND EXISTS"
        " (SELECT 1 FROM publishing_publishevent e WHERE e.post_id = p.id"
        " AND e.kind = 'published')"
    )
    cancelled = soak.scalar("SELECT count(*) FROM publishing_post WHERE status = 'draft'")
    return out == 0, f"{cancelled} cancelled, {out} out"


def none_early(soak: Soak, end_db) -> tuple[bool, str]:
    early = soak.scalar(
        "SELECT count(*) FROM publishing_post WHERE published_at < publish_at"
    ) + soak.scalar(
        "SELECT count(*) FROM publishing_publishevent WHERE kind = 'published' AND lateness < 0"
    )
    return early == 0, f"{early} early"


class Disturbance(NamedTuple):
    """A time (epoch seconds) when faults may have kept posts (``post_id``'s, or any) waiting."""

    start: float
    end: float
    post_id: int | None = None

    def explains(self, post_id: int, due: float, lateness: float) -> bool:
        """Whether the post was still on time when it began and went live before it ended.

        A post already later than LATE_BOUND when the faults began was not late because of
        them, and one that went live long after the group recovered was not either.
        """
        return (
            self.post_id in (None, post_id)
            and self.start - LATE_BOUND <= due
            and due + lateness <= self.end
        )


def disturbances(soak: Soak) -> list[Disturbance]:
    """From each fault that disrupts publishing until FAULT_SLACK after it ended, overlapping
    ones merged (a post may wait through several); a rowlock's for its own post only."""
    spans = sorted(
        (f.wall, f.ended_wall() + FAULT_SLACK) for f in soak.faults if f.disrupts_publishing
    )
    merged: list[Disturbance] = []
    for start, end in spans:
        if merged and start <= merged[-1].end:
            merged[-1] = merged[-1]._replace(end=max(end, merged[-1].end))
        else:
            merged.append(Disturbance(start, end))
    held = [
        Disturbance(f.wall, f.ended_wall() + FAULT_SLACK, f.post_id)
        for f in soak.faults
        if f.post_id is not None
    ]
    return merged + held


def posts_on_time(soak: Soak, end_db) -> tuple[bool, str]:
    """Every post the scheduler published went live within LATE_BOUND of its time, unless a
    fault explains it (see Disturbance.explains); the detail names the worst that none does.

    The lone posts of the editors' quiet spells are the ones only a wake-up gets out on time.
    """
    rows = soak.query(
        "SELECT p.id, p.slug, p.publish_at, e.lateness FROM publishing_publishevent e"
        " JOIN publishing_post p ON p.id = e.post_id"
        " WHERE e.kind = 'published' AND e.lateness IS NOT NULL"
    )
    spans = disturbances(soak)
    late = [
        (lateness, post_id, soak.local_time(publish_at))
        for post_id, _, publish_at, lateness in rows
        if lateness > LATE_BOUND
    ]
    unexplained = sorted(
        (item for item in late if not any(s.explains(item[1], item[2], item[0]) for s in spans)),
        reverse=True,
    )
    lone = [lateness for _, slug, _, lateness in rows if "-lone-" in slug]
    lone_ids = {post_id for post_id, slug, _, _ in rows if "-lone-" in slug}
    near = lone_commits_near_probe_start(soak)
    if unexplained:
        lateness, post_id, due = unexplained[0]
        lone_post = " (a lone post)" if post_id in lone_ids else ""
        return False, (
            f"{len(unexplained)} over {LATE_BOUND:.0f} s with no fault near; worst: post"
            f" {post_id}{lone_post} due {clock_text(due)}, {lateness:.1f} s late"
        )
    return True, (
        f"{len(rows)} published, max {max((r[3] for r in rows), default=0):.2f} s late"
        f" ({len(late)} over {LATE_BOUND:.0f} s, each in a fault); {len(lone)} lone posts"
        f" ({near} committed within 15 ms of the probe's start), max {max(lone, default=0):.2f} s"
    )


def lone_commits_near_probe_start(soak: Soak) -> int:
    """How many lone posts committed within 15 ms of their probe run's start: the moment a
    wake-up can go missing (the others tested the wake-up, but not that race)."""
    near = 0
    for _, slot, committed in soak.lone_commits:
        if soak.db.vendor == "mysql":  # naive times in UTC, as Django stores them there
            slot = slot.astimezone(UTC).replace(tzinfo=None)
        started = soak.scalar(
            "SELECT started_at FROM coordination_jobrun WHERE job = %s AND slot = %s",
            (PROBE_JOB, slot),
        )
        if started is not None and abs(db_epoch(started) - db_epoch(slot) - committed) < 0.015:
            near += 1
    return near


def progress(soak: Soak, end_db) -> tuple[bool, str]:
    """Every unpaused chaos job's next slot is within a period of now (settle waited enough).

    A job counts as stuck only if it lags in three samples 0.3 s apart, so a tick that is just
    under way is not mistaken for one that never comes.
    """
    lagging = soak.lagging_jobs()
    for _ in range(2):
        if not lagging:
            break
        time.sleep(0.3)
        lagging = {job: why for job, why in soak.lagging_jobs().items() if job in lagging}
    detail = "; ".join(f"{job}: {why}" for job, why in lagging.items())
    return not lagging, detail or f"all {len(JOBS)} jobs on schedule"


def ledger_rates(soak: Soak, end_db) -> tuple[bool, str]:
    """Runs per minute (any 60 s window) are bounded; manual runs match run-now requests; the
    publish job does not spin on a locked post."""
    started = defaultdict(list)
    for job, at in soak.query(
        f"SELECT job, started_at FROM coordination_jobrun WHERE {CHAOS_OR_PUBLISH}"
        f" AND {soak.db.q('trigger')} <> 'manual' AND started_at IS NOT NULL"
        " ORDER BY job, started_at",
        {"publish": soak.publish_job},
    ):
        started[job].append(at)
    busiest = [(job, window_max(times, timedelta(seconds=60))) for job, times in started.items()]
    problems = []
    for job, count in busiest:
        if job == soak.publish_job:
            limit = PUBLISH_MAX_PER_MINUTE
        else:
            limit = 60 / JOBS[job].period * 1.2 + SPIN_SLACK
        if count > limit:
            problems.append(f"{job} {count}/min (limit {limit:.0f})")
    for job, count in soak.query(
        "SELECT job, count(*) FROM coordination_jobrun WHERE job LIKE 'chaosapp.%%'"
        f" AND {soak.db.q('trigger')} = 'manual' GROUP BY job"
    ):
        if count > soak.run_requests[job]:
            problems.append(f"{job} {count} manual runs for {soak.run_requests[job]} requests")
    rates = [f.rate for f in soak.faults if f.rate is not None]
    problems += [f.problem for f in soak.faults if f.kind == "rowlock" and "runs/s" in f.problem]
    publish = dict(busiest).get(soak.publish_job, 0)
    detail = f"publish max {publish}/min" + (
        f", {max(rates):.1f}/s while a post was locked" if rates else ""
    )
    return not problems, "; ".join(problems[:3]) or detail


def claimed_elsewhere_lines(soak: Soak) -> list[float]:
    """Return the times of the schedulers' "already claimed elsewhere" lines (epoch seconds)."""
    stamps = []
    for path in soak.workdir.glob("chaos-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            match = LOG_STAMP.match(line)
            if match and CLAIMED_ELSEWHERE in line:
                stamps.append(datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp())
    return sorted(stamps)


def few_claimed_elsewhere(soak: Soak, end_db) -> tuple[bool, str]:
    """Each line is charged to the latest fault before it (or to the start-up).

    A spin goes on through later faults, so the detail names the first fault over the bound,
    the likely cause, rather than the one that happened to precede most of the lines.
    """
    stamps = claimed_elsewhere_lines(soak)
    walls = [fault.wall for fault in soak.faults]
    per_fault = Counter(bisect.bisect_right(walls, stamp) - 1 for stamp in stamps)
    over = sorted(i for i, n in per_fault.items() if n > CLAIMED_ELSEWHERE_PER_FAULT)
    if not over:
        return True, f"{len(stamps)} lines; at most {max(per_fault.values(), default=0)}/fault"
    first = over[0]
    culprit = "start-up" if first < 0 else f"{soak.faults[first].kind} #{first + 1}"
    if first >= 0:
        culprit += f" ({soak.faults[first].target})"
    return False, (
        f"{len(stamps)} lines; over {CLAIMED_ELSEWHERE_PER_FAULT} after {len(over)} fault(s),"
        f" first {per_fault[first]} after {culprit}"
    )


def no_self_overlap(soak: Soak, end_db) -> tuple[bool, str]:
    """No run starts before an earlier-started run of the same job has finished.

    Abandoned rows are left out: their finish time is when another node noticed, not when the
    run ended.
    """
    overlaps = []
    prev_end: dict[str, datetime] = {}
    for job, slot, started_at, finished_at in soak.query(
        "SELECT job, slot, started_at, finished_at FROM coordination_jobrun WHERE"
        f" {CHAOS_OR_PUBLISH} AND started_at IS NOT NULL AND finished_at IS NOT NULL"
        " AND status NOT IN ('missed', 'abandoned') ORDER BY job, started_at, id",
        {"publish": soak.publish_job},
    ):
        if job in prev_end and started_at < prev_end[job]:
            overlaps.append((job, slot, prev_end[job] - started_at))
        prev_end[job] = max(finished_at, prev_end.get(job, finished_at))
    detail = f"{len(overlaps)} overlapping runs" + "".join(
        f"; {job} {slot:%H:%M:%S} by {gap.total_seconds():.1f} s" for job, slot, gap in overlaps[:3]
    )
    return not overlaps, detail


def processes_running(soak: Soak, end_db) -> tuple[bool, str]:
    dead = [r.name for r in soak.replicas.values() if not r.alive()]
    web_ok = soak.web is not None and soak.web.poll() is None
    return (
        not dead and web_ok,
        f"dead: {dead or 'none'}; web {'up' if web_ok else 'DOWN'}",
    )


def kind_problems(soak: Soak, kind: str, noun: str = "stops") -> tuple[bool, str]:
    """Held when no fault of ``kind`` recorded a problem; the detail names the first few."""
    faults = [f for f in soak.faults if f.kind == kind]
    problems = [f"{f.target}: {f.problem}" for f in faults if f.problem]
    return not problems, "; ".join(problems[:2]) or f"{len(faults)} {noun}"


def term_exits(soak: Soak, end_db) -> tuple[bool, str]:
    return kind_problems(soak, "term")


def once_exits(soak: Soak, end_db) -> tuple[bool, str]:
    return kind_problems(soak, "once", "runs")


def lease_term_exits(soak: Soak, end_db) -> tuple[bool, str]:
    held, detail = kind_problems(soak, "leaseterm")
    times = [f.exit_seconds for f in soak.faults if f.kind == "leaseterm" and f.exit_seconds]
    return held, detail + (f"; slowest {max(times):.2f} s" if times else "")


def bounded_kind(soak: Soak, kind: str) -> tuple[bool, str]:
    """Held when no fault of ``kind`` recorded a problem; the detail gives the worst gap."""
    held, detail = kind_problems(soak, kind, "faults")
    gaps = [f.lead_gap for f in soak.faults if f.kind == kind and f.lead_gap is not None]
    return held, detail + (f"; worst {max(gaps):.2f} s after the kill" if gaps else "")


def double_faults_lead_again(soak: Soak, end_db) -> tuple[bool, str]:
    return bounded_kind(soak, "doublefault")


def killed_runs_resume(soak: Soak, end_db) -> tuple[bool, str]:
    return bounded_kind(soak, "killrun")


INVARIANTS: list[tuple[str, Callable[[Soak, object], tuple[bool, str]]]] = [
    ("progress: every job's next slot near now", progress),
    ("no (job, slot) ran twice", no_slot_twice),
    ("transactional effects match succeeded runs", effects_match_runs),
    ("ledger: each slot once; missed with a reason", ledger_complete),
    ("no run left 'running' (dead node or stuck)", no_run_left_running),
    ("every due post published exactly once", posts_published_once),
    ("no cancelled post published", no_cancelled_published),
    ("no post live before its time", none_early),
    (f"every post live within {LATE_BOUND:.0f} s, or a fault explains it", posts_on_time),
    ("no spin: ledger rows per minute bounded", ledger_rates),
    (
        f"no spin: <= {CLAIMED_ELSEWHERE_PER_FAULT} 'claimed elsewhere' per fault",
        few_claimed_elsewhere,
    ),
    ("no job overlaps itself", no_self_overlap),
    ("every process not deliberately killed is running", processes_running),
    ("SIGTERM exits 0", term_exits),
    ("--once exits 0 unless cut off", once_exits),
    (f"lease-mode SIGTERM: stops within {LEASE_TERM_MAX:.0f} s, exits 0", lease_term_exits),
    (
        f"frozen waiter + killed leader: leads again <= {DOUBLE_FAULT_BOUND:.0f} s",
        double_faults_lead_again,
    ),
    (
        f"killed node's claim-first job resumes <= {KILLED_RUN_BOUND:.0f} s",
        killed_runs_resume,
    ),
]


def check_invariants(soak: Soak, end_db) -> list[tuple[str, bool, str]]:
    """Run every check; progress first, as the settle phase timed it."""
    return [(name, *check(soak, end_db)) for name, check in INVARIANTS]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def fault_notes(faults: list[Fault]) -> str:
    """Up to two distinct notes of a fault kind, problems first."""
    problems = sorted({f"!! {f.problem}" for f in faults if f.problem})
    notes = problems + sorted({f.note for f in faults if f.note and not f.problem})
    more = f" (+{len(notes) - 2} more)" if len(notes) > 2 else ""
    return "; ".join(notes[:2]) + more


def report(soak: Soak, results, duration: float) -> bool:
    print(
        f"\nChaos soak: {duration:.0f} s, seed {soak.args.seed}, {soak.args.replicas} replicas"
        f" (+{len(LEASE_REPLICAS)} lease-mode), {len(soak.faults)} faults, editor ops"
        f" {dict(soak.editor_ops)} ({soak.editor_errors} editor errors)"
    )
    print(f"\n  {'fault':<14} {'count':>5} {'takeover max':>13} {'p95':>7}  notes")
    by_kind = defaultdict(list)
    for fault in soak.faults:
        by_kind[fault.kind].append(fault)
    for kind in fault_kinds(soak.db):
        faults = by_kind.get(kind, [])
        times = [f.takeover for f in faults if f.takeover is not None]
        missing = sum(1 for f in faults if f.takeover is None and f.expects_takeover)
        tmax = f"{max(times):.2f} s" if times else "-"
        p95 = f"{percentile(times, 95):.2f} s" if times else "-"
        extra = (f"{missing} without takeover; " if missing else "") + fault_notes(faults)
        print(f"  {kind:<14} {len(faults):>5} {tmax:>13} {p95:>7}  {extra}")
    print(f"\n  {'invariant':<52} held   detail")
    ok = True
    for name, held, detail in results:
        ok &= held
        print(f"  {name:<52} {'yes' if held else 'NO':<6} {detail}")
    takeovers_missing = sum(1 for f in soak.faults if f.takeover is None and f.expects_takeover)
    if takeovers_missing:
        print(f"\n  {takeovers_missing} fault(s) never saw work resume in time")
        ok = False
    print(f"\n  result: {'ALL INVARIANTS HELD' if ok else 'INVARIANT BROKEN'}")
    return ok


# --- main --------------------------------------------------------------------------------


def setup_django(env: dict) -> str:
    """Configure Django in this process (editors' stream, run-now); return the publish job."""
    for key in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "INSTATIC_TEST_EXTRA_APPS"):
        os.environ[key] = env[key]
    os.environ["INSTATIC_VAR_DIR"] = env["INSTATIC_VAR_DIR"]
    import django

    django.setup()
    from publishing.job_names import PUBLISH_JOB

    return PUBLISH_JOB


def wait_for_leaders(soak: Soak) -> None:
    for group in (*SESSION_GROUPS, LEASE_GROUP):
        while soak.leader(group) is None:
            time.sleep(0.1)


def inject_faults(soak: Soak, started: float) -> None:
    """Inject faults until the duration is up: every kind once per round, rounds shuffled.

    The pause between faults is short so a 10-minute soak injects at least 150 of them.
    """
    rng = soak.rng
    plan = fault_kinds(soak.db)
    while time.monotonic() - started < soak.args.duration:
        time.sleep(rng.uniform(0.2, 1.0))
        reap_once(soak)
        if time.monotonic() - started >= soak.args.duration:
            break
        if not plan:
            plan = fault_kinds(soak.db)
            rng.shuffle(plan)
        soak.faults.append(inject(soak, plan.pop()))


def settle(soak: Soak, end_db) -> None:
    """Let the system heal before the checks.

    Everything due before the end gets published, leases of killed nodes expire, ``--once``
    processes finish, and at least ``lease + 2 x period`` (the slowest job's) passes after the
    last fault, the time the progress invariant allows.
    """
    log("settling")
    reap_once(soak, wait=30)
    deadline = time.monotonic() + 30 + 2 * LEASE
    while time.monotonic() < deadline:
        due = soak.scalar(
            "SELECT count(*) FROM publishing_post WHERE status = 'scheduled'"
            " AND publish_at < %s AND last_error = ''",
            (end_db,),
        )
        if not due and not soak.scalar(dead_running_sql(soak.db)):
            break
        time.sleep(0.5)
    last_fault = max((f.ended for f in soak.faults if f.ended), default=time.monotonic())
    progress_at = last_fault + LEASE + 2 * max(job.period for job in JOBS.values())
    time.sleep(max(0.0, progress_at - time.monotonic()))


#: Soaks share machine-wide resources (the 10.231.0.0/16 addresses of their namespaces'
#: links), so two at once on one machine would route each other's packets: they take turns.
MACHINE_LOCK = Path("/tmp/instatic-chaos.lock")


def run(args: argparse.Namespace) -> bool:
    with open(MACHINE_LOCK, "a") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another soak runs on this machine ({MACHINE_LOCK}); waiting for it to end")
            fcntl.flock(held, fcntl.LOCK_EX)
        return run_alone(args)


def run_alone(args: argparse.Namespace) -> bool:
    rng = random.Random(args.seed)
    network = Network(args.replicas, tag=str(os.getpid() % 1000))
    network.create()
    workdir = Path(
        subprocess.check_output(["mktemp", "-d", "/tmp/instatic-chaos-XXXX"], text=True).strip()
    )
    db = chaos_databases.make(args.vendor)
    soak = None
    keep = True  # an error before the report keeps the logs too
    try:
        db.start(["127.0.0.1"] + [network.host_address(i) for i in network.created])
        log(f"{db.label} at {db.url()}")
        soak = Soak(args, db, network, workdir, rng)
        env = soak.env()
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=BASE_DIR,
            env=env,
            check=True,
        )
        soak.publish_job = setup_django(env)
        soak.measure_clock()
        for i in range(1, args.replicas + 1):
            soak.start_replica(i)
        for i in LEASE_REPLICAS:
            soak.start_replica(i, lease=True)
        from devtools.servers import free_port

        soak.web_port = free_port()
        soak.web = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{soak.web_port}", "--noreload"],
            cwd=BASE_DIR,
            env={**env, "DJANGO_DEBUG": "1"},
            stdout=open(workdir / "web.log", "wb"),  # noqa: SIM115 - owned by the child
            stderr=subprocess.STDOUT,
        )
        wait_for_leaders(soak)
        stream = threading.Thread(target=editor_stream, args=(soak, args.seed), daemon=True)
        stream.start()
        started = time.monotonic()
        inject_faults(soak, started)
        soak.stop_stream.set()
        stream.join(30)
        end_db = soak.db_now()
        settle(soak, end_db)
        results = check_invariants(soak, end_db)
        code = report(soak, results, time.monotonic() - started)
        # A broken invariant is only worth something with the nodes' own account of it.
        keep = args.keep_logs or not code
        return code
    finally:
        if soak is not None:
            stop_everything(soak)
        db.stop()
        network.destroy()
        if keep:
            if soak is not None:
                print_trouble(workdir)
            log(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def print_trouble(workdir: Path, lines: int = 12) -> None:
    """Print each node's last warnings and errors: where a CI log must show what happened."""
    for path in sorted(workdir.glob("*.log")):
        trouble = [
            line
            for line in path.read_text(errors="replace").splitlines()
            if " WARNING " in line or " ERROR " in line
        ]
        if trouble:
            print(f"--- {path.name}: last warnings and errors", flush=True)
            print("\n".join(line[:300] for line in trouble[-lines:]), flush=True)


def stop_everything(soak: Soak) -> None:
    soak.stop_stream.set()
    processes = [r.process for r in soak.replicas.values()] + [o.process for o in soak.once_runs]
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.terminate()
    for process in processes:
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if soak.web is not None:
        soak.web.terminate()
        soak.web.wait(20)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duration", type=float, default=float(os.environ.get("CHAOS_DURATION", 180))
    )
    parser.add_argument("--seed", type=int, default=int(os.environ.get("CHAOS_SEED", 1)))
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--keep-logs", action="store_true")
    parser.add_argument(
        "--vendor",
        choices=sorted(chaos_databases.DATABASES),
        default=os.environ.get("CHAOS_VENDOR", "postgresql"),
        help="the database server to soak on (default postgresql)",
    )
    args = parser.parse_args(argv)
    if not 3 <= args.replicas <= 5:
        parser.error("--replicas must be 3 to 5")
    return 0 if run(args) else 1


if __name__ == "__main__":
    sys.exit(main())
