"""The soak's fixed plan: its jobs (tests.chaosapp's), lease, groups, and the bounds it checks.

One place for every number an invariant or a fault holds the system to, each with why it is
that number.
"""

import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
LEASE = 3.0
HEARTBEAT = 0.5
# What the session-lock replicas run; on PostgreSQL CHAIN_GROUP too (Soak.session_groups).
SESSION_GROUPS = ("publishing", "plugins")
# The group of the when-due job on workers (tests/chaosapp/jobs.py), run on PostgreSQL only:
# its leader listens for NOTIFY and sleeps up to 30 s, so a lost wake-up shows. A MariaDB
# leader polls every second, so there it would only add load to a soak whose timing bounds
# (failovers, deliveries) have little room on 2 shared cores under make test's coverage.
CHAIN_GROUP = "chaoschain"
LEASE_GROUP = "chaoslease"  # run only by the lease-mode replicas (tests/chaosapp/jobs.py)
LEASE_REPLICAS = (101, 102)  # their indexes, apart from the session replicas' 1..5
LEASE_JOB = "chaosapp.lease_tick"
# On PostgreSQL the lease-mode replicas reach the server only through a PgBouncer in
# transaction pooling mode: a small pool, each transaction on the next server connection in
# turn, so no two of a node's transactions can count on sharing a session. After a failed
# server login PgBouncer waits server_login_retry (15 s by default) before it tries again: a
# failover (the old primary refusing) would stall the lease group that long.
PGBOUNCER_CONFIG = {"default_pool_size": 4, "server_round_robin": 1, "server_login_retry": 1}
# The advisory lock of the commit gate (devtools/commit_gate.py) on LEASE_JOB's runs, which
# the freeze-at-commit fault holds to stop the lease holder between its fence and its COMMIT.
COMMIT_GATE_KEY = 31033
# What a lease holder that wakes up inside a fenced run whose lease passed logs (runner.py).
FENCED_RUN_LOG = re.compile(
    r"failed after the lock was lost; leaving it to the new leader|rolled back: lock lost"
)
# A lease passes to a follower at most one lease after the holder stopped renewing it, the
# follower's next poll of the lease (every 0.25 s) and a claim's round trips later: the
# documented bound is LEASE + HEARTBEAT. The margin covers a claim held up on a starved CPU
# (bench/lease_takeover.py measured claims 0.01-0.25 s after the lease ran out).
LEASE_TAKEOVER_MARGIN = 0.5
LEASE_TAKEOVER_BOUND = LEASE + HEARTBEAT + LEASE_TAKEOVER_MARGIN
# After a PgBouncer restart every lease-mode connection has dropped: the holder reconnects
# (its first retry comes at once) and renews its lease, or its lease passes; either way the
# lease group runs again within the takeover bound and its next every-second slot.
PGBOUNCER_RESTART_BOUND = LEASE_TAKEOVER_BOUND + 1.0  # LEASE_JOB's period


@dataclass(frozen=True)
class ChaosJob:
    period: int  # seconds
    transactional: bool = False
    group: str = "plugins"
    on_workers: bool = False  # run_on="workers": queued by the leader, run by a worker process
    retry_abandoned: bool = False  # one effect per attempt (its effect says which)


JOBS = {  # the periodic jobs of tests.chaosapp
    "chaosapp.tx_tick": ChaosJob(1, transactional=True),
    "chaosapp.claim_tick": ChaosJob(2),
    "chaosapp.flaky": ChaosJob(3, transactional=True),
    "chaosapp.hang": ChaosJob(5),
    "chaosapp.slow_claim": ChaosJob(4),
    "chaosapp.catchup": ChaosJob(1, transactional=True),
    "chaosapp.worker_tick": ChaosJob(1, transactional=True, on_workers=True),
    "chaosapp.worker_claim": ChaosJob(2, on_workers=True, retry_abandoned=True),
    LEASE_JOB: ChaosJob(1, transactional=True, group=LEASE_GROUP),
    "chaosapp.publish_probe": ChaosJob(10, transactional=True, group="publishing"),
}
PLUGIN_JOBS = [name for name, job in JOBS.items() if job.group == "plugins"]
CLAIM_FIRST_JOBS = [name for name in PLUGIN_JOBS if not JOBS[name].transactional]
TRANSACTIONAL_JOBS = [name for name, job in JOBS.items() if job.transactional]
WORKER_JOBS = [name for name, job in JOBS.items() if job.on_workers]
WORKER_TX_JOB = "chaosapp.worker_tick"
WORKER_CLAIM_JOB = "chaosapp.worker_claim"  # claim first, then ~1 s of work on the worker
# Effects of these jobs are one per attempt (a retried slot has several), not one per slot.
RETRIED_JOBS = [name for name, job in JOBS.items() if job.retry_abandoned]
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
# After a failover the lease group runs again through PgBouncer (pointed at the new primary)
# within a loop's longest back-off, PgBouncer's server_login_retry and the takeover bound.
FAILOVER_LEASE_BOUND = RETRY_MAX + 1.0 + LEASE_TAKEOVER_BOUND
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
# job free again within this long after the kill, per vendor (docs/ha.md): a lock wait of the
# killed node for another group's lock ends at the server's next check of its client,
# PostgreSQL's within 100 ms, MariaDB's up to a second after the kill.
KILLED_RUN_BOUNDS = {"postgresql": 1.0, "mysql": 1.5}
# Worker processes. Each session replica runs WORKERS_PER_REPLICA of them beside its
# scheduler (runscheduler --workers), and the soak runs one worker-only node
# (runworker --processes) with WORKER_NODE_PROCESSES.
WORKERS_PER_REPLICA = 1
WORKER_NODE_PROCESSES = 1
WORKER_NODE = 201  # the worker-only node's index, apart from the replicas'
# A worker fault freezes its worker this much longer than the lease (s), so the leader's sweep
# (every half lease) finds its heartbeat stale and fences it before it resumes.
WORKER_FREEZE_PAST_LEASE = (1.0, 2.5)
# A queued run starts within this long of being queued (a worker takes it at the NOTIFY, or
# its next poll), unless it waited behind a fault (WORKER_DISRUPTIONS): a worker busy with a
# previous run, or a whole replica starved on 2 shared cores, still takes it within a lease
# or two; three leases is not a slow machine but a lost task.
QUEUE_WAIT_BOUND = 3 * LEASE
# The faults that can hold up a queued run: each that stops, cuts off or fences a worker
# process (a scheduler's workers are its children: they die and are cut off with it), or the
# plugins leader whose sweep gives a lost run a new task; and each database restart or failover.
WORKER_FAULTS = frozenset({"workerkill", "workerfreeze", "workersession"})
WORKER_DISRUPTIONS = PUBLISHING_DISRUPTIONS | WORKER_FAULTS | {"lockonly", "runnow"}
# How long a fault's hold on the queue may outlast the fault (which ends once work resumed):
# a dead worker's transactional run waits for its heartbeat to go a lease stale before the
# sweep queues it again, and a worker that crashed on a database error is started again by
# its pool within a restart interval (coordination.workers.pool.RESTART_INTERVAL).
WORKER_FAULT_SLACK = LEASE + 3.0
# The when-due job on workers, alone in its group (tests/chaosapp/jobs.py): each run answers
# "next due CHAIN_ANSWER s from now", which its leader learns only from the wake-up the
# worker sends after the outcome (or from the run's abandonment, when its worker died). The
# leader sleeps up to INSTATIC_NOTIFY_MAX_TICK (30 s) where it listens, so a lost wake-up
# shows as a gap: the next run is queued within CHAIN_BOUND of when it was due; within
# CHAIN_FAULT_BOUND when a fault window (WORKER_DISRUPTIONS) overlaps the wait: a dead
# worker's run is abandoned once its heartbeat is a lease stale, a dead leader's lock passes
# within a lease, a restarted database is back within its back-off (RETRY_MAX).
CHAIN_JOB = "chaoschain.worker_chain"
CHAIN_ANSWER = 1.0
CHAIN_BOUND = 3.0
CHAIN_FAULT_BOUND = 15.0

# The editors' quiet spells: busy editing for this long (s) between two of them.
QUIET_EVERY = (3.0, 6.0)
LONE_LEAD = 2.0  # a lone post goes to PROBE_JOB's first slot at least this far (s) ahead
SCHEDULE_AHEAD = 0.1  # a lone post's schedule starts this long (s) before its timed commit
POSTPONE_STEP = 0.05  # seconds between the posts a quiet spell postpones past the probe's slot

# The release stream (devtools/chaos/releases.py): every RELEASE_EVERY seconds a release of
# RELEASE_POSTS new drafts and, one time in RELEASE_TAKEDOWN_CHANCE, RELEASE_TAKEDOWNS of the
# live posts (in no pending release) taken down, scheduled RELEASE_AHEAD seconds ahead by the
# database clock. A quiet spell keeps releases off its probe's slot as it keeps posts off it:
# none is due from QUIET_RELEASE_BEFORE seconds before the slot until the postponed posts are
# (a release going out after the lone post's commit would get it out without its wake-up).
RELEASE_EVERY = (2.0, 5.0)
RELEASE_POSTS = (3, 30)
RELEASE_TAKEDOWN_CHANCE = 0.3
RELEASE_TAKEDOWNS = (1, 3)
RELEASE_AHEAD = (2.0, 10.0)
QUIET_RELEASE_BEFORE = 1.0
RELEASE_PAUSE = 0.4  # the release stream waits this long (s) before a lone post's commit
RELEASE_SLUG = "-rel-"  # in the slug of every post the release stream makes (and no other)

# Bounds of the no-spin invariants.
SPIN_SLACK = 5  # runs per minute above 1.2 x the schedule (catch-up and retried runs)
PUBLISH_MAX_PER_MINUTE = 240  # the editors make the publish job due about 3 times a second
ROWLOCK_MAX_RATE = 6.0  # publish runs per second while one due post is locked
CLAIMED_ELSEWHERE = "already claimed elsewhere"
CLAIMED_ELSEWHERE_PER_FAULT = 5
# Seconds for a lease-mode replica to stop on SIGTERM (no job running): from the signal to its
# "node ... stopped" line, which is what the scheduler controls. The process itself must then
# be gone (exit 0) within LEASE_TERM_WAIT; interpreter teardown on a starved CPU is not ours:
# 0.3-1.5 s after the line in soaks on their own, 5 s and more under ``make test``'s coverage
# (which writes its data at exit) beside the other test runs.
LEASE_TERM_MAX = 1.0
LEASE_TERM_WAIT = 15.0  # then it is killed, so a stuck one does not stall the soak
# Log lines of a ``--once`` process whose work a fault cut off (its exit code may be non-zero).
ONCE_CUT_OFF = re.compile(
    r"database unavailable|could not connect|server closed the connection|terminating connection"
    r"|connection (refused|failed|is closed)|OperationalError|InterfaceError|no longer leader"
    r"|lost advisory lock|Lost connection|gone away|Can't connect"
)
LOG_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")

# The outbox in the soak: the transactional subscriber of published events
# (tests/chaosapp/jobs.py, one Effect "event:<id>" each) and the webhook endpoint on the soak's
# receiver (devtools/chaos/webhooks.py). The replicas' webhook timeouts and first back-off are
# short so that a receiver's failures and a partitioned sender cost seconds, and every
# delivery succeeds within the settle phase.
EVENT_SUBSCRIBER = "chaosevents.record"
# The outbox dispatcher looks for undispatched events on its own this often (s) (its
# fallback schedule): a wake-up it missed delays an event at most that long.
DISPATCH_FALLBACK = 17.0  # its 15 s fallback schedule, and a run
#: The longest a dispatched delivery may wait for its subscriber's run: a webhook's or a
#: subscriber's 60 s fallback schedule when no wake-up reaches it (its attempt was lost with
#: a killed node, or the dispatcher's node died between its commit and the after-commit
#: wake-up of a subscriber whose run held its state row), and a run.
DELIVERY_FALLBACK = 62.0
# With no fault near, an event reaches the transactional subscriber within this long (s): the
# dispatcher's wake-up comes 250 ms after the commit, then two runs (the dispatcher's and the
# subscriber's), each within a lease or so even queued for a worker on 2 busy cores. Under the
# subscriber's 60 s fallback and the dispatcher's 15 s one: an event that waited for either
# (its wake-up lost) is over it.
DELIVERY_WAIT_BOUND = 12.0
WEBHOOK_READ_TIMEOUT = 1.0
#: Review is on in every process of the soak: the streams submit and approve what they
#: schedule, and a tampering editor changes approved posts behind the actions' back, so the
#: go-live checks run (and are checked) under every fault.
REVIEW_ENV = {"INSTATIC_REQUIRE_REVIEW": "1"}
#: How a tampered post's body starts: changed after its approval, it must never go live.
TAMPERED = "Tampered after approval"
WEBHOOK_ENV = {
    "INSTATIC_WEBHOOK_ALLOW_PRIVATE": "1",
    "INSTATIC_WEBHOOK_ALLOW_HTTP": "1",
    "INSTATIC_WEBHOOK_RETRY_BACKOFF": "1",
    "INSTATIC_WEBHOOK_CONNECT_TIMEOUT": "1",
    "INSTATIC_WEBHOOK_READ_TIMEOUT": str(WEBHOOK_READ_TIMEOUT),
}
