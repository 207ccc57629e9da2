"""Chaos soak: run the real system under random faults, then check its invariants.

``make chaos`` (or ``python -m devtools.chaos --duration 600 --seed 1``) starts a throwaway
PostgreSQL, several ``runscheduler`` replicas, a web process, a stream of editors scheduling,
rescheduling and cancelling posts, and plugin jobs at several cadences (one transactional, one
claim-first, one that sometimes fails, one that sometimes hangs). Meanwhile it injects faults at
random: SIGKILL, SIGSTOP then SIGCONT, SIGTERM and restart, termination of the leader's database
session, a PostgreSQL fast restart, and a network partition of one replica.

Each replica lives in a network namespace this script creates, joined to the host by a veth
pair whose host end carries a private address PostgreSQL listens on; a partition takes that
link down, so the replica's packets are silently dropped (no FIN, no RST) until it comes back.
Traffic only ever goes to loopback or to those namespaces. Without root (or ``ip netns``) the
partition fault is left out and reported as such.

Afterwards it checks, from the database, that no (job, slot) ran twice, every slot was run or
recorded, every due post was published exactly once and none early, no cancelled post was
published, every process not deliberately killed is running; it prints a table of faults and
invariants (with takeover times per fault kind) and exits non-zero if any invariant broke.
The run is reproducible from its seed: the same seed gives the same fault plan.
"""

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import psycopg

from devtools.pgcluster import PostgresCluster

BASE_DIR = Path(__file__).resolve().parent.parent
LEASE = 3.0
HEARTBEAT = 0.5
JOBS = {  # plugin jobs of tests.chaosapp and their interval in seconds
    "chaosapp.tx_tick": 1,
    "chaosapp.claim_tick": 2,
    "chaosapp.flaky": 3,
    "chaosapp.hang": 5,
}
# Runs still marked running although their node is gone (stopped or silent past the lease).
DEAD_RUNNING_SQL = f"""
SELECT count(*) FROM coordination_jobrun r WHERE status = 'running' AND job LIKE 'chaosapp.%%'
AND NOT EXISTS (SELECT 1 FROM coordination_node n WHERE n.instance = r.node_instance
AND n.stopped_at IS NULL AND n.last_heartbeat > now() - interval '{LEASE} seconds')
"""
FAULT_KINDS = ["kill", "freeze", "term", "session", "pgrestart", "partition"]


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
    deliberately_stopped: bool = False

    @property
    def name(self) -> str:
        return f"chaos-{self.index}.{self.incarnation}"

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class Fault:
    kind: str
    target: str
    at: float
    takeover: float | None = None
    note: str = ""


@dataclass
class Soak:
    args: argparse.Namespace
    cluster: PostgresCluster
    network: Network
    url: str
    workdir: Path
    rng: random.Random
    replicas: dict[int, Replica] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    web: subprocess.Popen | None = None
    web_port: int = 0
    stop_stream: threading.Event = field(default_factory=threading.Event)
    editor_errors: int = 0
    editor_ops: Counter = field(default_factory=Counter)

    def env(self, host: str = "127.0.0.1") -> dict:
        env = dict(os.environ)
        env.update(
            {
                "DATABASE_URL": f"postgres://postgres@{host}:{self.cluster.port}/instatic",
                "DJANGO_SETTINGS_MODULE": "tests.settings",
                "INSTATIC_TEST_EXTRA_APPS": "tests.chaosapp",
                "INSTATIC_VAR_DIR": str(self.workdir / "var"),
                "INSTATIC_LEASE": str(LEASE),
                "INSTATIC_HEARTBEAT_INTERVAL": str(HEARTBEAT),
                "INSTATIC_SHUTDOWN_GRACE": "5",
                "INSTATIC_FAILURE_PAUSE_THRESHOLD": "0",
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    # --- replicas ----------------------------------------------------------------------
    def start_replica(self, index: int) -> Replica:
        previous = self.replicas.get(index)
        incarnation = previous.incarnation + 1 if previous else 1
        log_path = self.workdir / f"chaos-{index}.{incarnation}.log"
        name = f"chaos-{index}.{incarnation}"
        process = subprocess.Popen(
            [
                *self.network.prefix(index),
                sys.executable,
                str(BASE_DIR / "manage.py"),
                "runscheduler",
                "--node-name",
                name,
            ],
            cwd=BASE_DIR,
            env=self.env(self.network.address(index)),
            stdout=open(log_path, "wb"),  # noqa: SIM115 - owned by the child
            stderr=subprocess.STDOUT,
        )
        replica = Replica(index, incarnation, process, log_path)
        self.replicas[index] = replica
        return replica

    def by_name(self, name: str | None) -> Replica | None:
        return next((r for r in self.replicas.values() if r.name == name), None)

    # --- database helpers ------------------------------------------------------------
    def query(self, sql: str, params=()):
        for _ in range(50):
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=3) as conn:
                    return conn.execute(sql, params).fetchall()
            except psycopg.OperationalError:
                time.sleep(0.2)
        raise RuntimeError(f"database unreachable for: {sql}")

    def leader(self, group: str = "plugins") -> str | None:
        rows = self.query('SELECT node FROM coordination_leadership WHERE "group" = %s', (group,))
        return rows[0][0] if rows else None

    def wait_new_leader(
        self, group: str, old: str | None, *, since: float, timeout: float = 30
    ) -> float | None:
        """Return seconds from ``since`` until a live node other than ``old`` leads ``group``."""
        start = since
        while time.monotonic() - start < timeout:
            current = self.leader(group)
            replica = self.by_name(current)
            if current and current != old and replica is not None and replica.alive():
                return time.monotonic() - start
            time.sleep(0.05)
        return None

    def wait_for_runs_after(self, since_db, *, since: float, timeout: float = 30) -> float | None:
        """Return seconds from ``since`` until the every-second job succeeds again."""
        start = since
        while time.monotonic() - start < timeout:
            rows = self.query(
                "SELECT 1 FROM coordination_jobrun WHERE job = 'chaosapp.tx_tick'"
                " AND status = 'succeeded' AND started_at > %s LIMIT 1",
                (since_db,),
            )
            if rows:
                return time.monotonic() - start
            time.sleep(0.05)
        return None

    def db_now(self):
        return self.query("SELECT now()")[0][0]


# --- the editors' stream -------------------------------------------------------------------


def editor_stream(soak: Soak, seed: int) -> None:
    """Schedule, reschedule and cancel posts through the publishing services, continuously."""
    import django

    django.setup()
    from django.db import close_old_connections, connection

    from coordination.clock import database_now
    from publishing import services
    from publishing.models import Post, PostStatus

    rng = random.Random(seed)
    counter = 0
    while not soak.stop_stream.is_set():
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


# --- faults ------------------------------------------------------------------------------


def inject(soak: Soak, kind: str) -> Fault:
    rng = soak.rng
    group = "plugins" if rng.random() < 0.5 else "publishing"
    leader_name = soak.leader(group)
    leader = soak.by_name(leader_name)
    if leader is None or not leader.alive():
        leader = rng.choice([r for r in soak.replicas.values() if r.alive()])
    fault = Fault(kind, leader.name if kind != "pgrestart" else "postgresql", time.monotonic())
    log(f"fault {kind} -> {fault.target} ({group} leader {leader_name})")
    if kind == "kill":
        leader.process.kill()
        leader.process.wait()
        leader.deliberately_stopped = True
        fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
        soak.start_replica(leader.index)
    elif kind == "term":
        leader.process.terminate()
        code = leader.process.wait(30)
        leader.deliberately_stopped = True
        fault.note = f"exit {code}"
        fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
        if code != 0:
            fault.note += " (expected 0)"
        soak.start_replica(leader.index)
    elif kind == "freeze":
        leader.process.send_signal(signal.SIGSTOP)
        fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
        time.sleep(rng.uniform(0.5, 2.0))
        leader.process.send_signal(signal.SIGCONT)
    elif kind == "session":
        rows = soak.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (f"{leader.name}/lock",),
        )
        fault.note = f"{len(rows)} session(s) ended"
        fault.takeover = soak.wait_for_runs_after(soak.db_now(), since=fault.at)
    elif kind == "pgrestart":
        soak.cluster.restart("fast")
        since = soak.db_now()
        fault.takeover = soak.wait_for_runs_after(since, since=fault.at)
    elif kind == "partition":
        if not soak.network.available:
            fault.note = "skipped: no network namespaces"
            return fault
        soak.network.partition(leader.index, down=True)
        fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
        time.sleep(rng.uniform(1.0, 3.0))
        soak.network.partition(leader.index, down=False)
    return fault


# --- invariants --------------------------------------------------------------------------


def check_invariants(soak: Soak, end_db) -> list[tuple[str, bool, str]]:
    q = soak.query
    results = []

    twice = q(
        "SELECT job, slot, count(*) FROM jobsapp_effect WHERE job LIKE 'chaosapp.%%'"
        " GROUP BY job, slot HAVING count(*) > 1"
    )
    results.append(("no (job, slot) ran twice", not twice, f"{len(twice)} doubled"))

    orphans = q(
        "SELECT count(*) FROM jobsapp_effect e WHERE e.job IN ('chaosapp.tx_tick',"
        " 'chaosapp.flaky') AND NOT EXISTS (SELECT 1 FROM coordination_jobrun r"
        " WHERE r.job = e.job AND r.slot = e.slot AND r.status = 'succeeded')"
    )[0][0]
    results.append(
        ("transactional effects match succeeded runs", orphans == 0, f"{orphans} without a run")
    )

    gaps = []
    for job, interval in JOBS.items():
        slots = [
            row[0]
            for row in q(
                "SELECT slot FROM coordination_jobrun WHERE job = %s ORDER BY slot", (job,)
            )
        ]
        for a, b in zip(slots, slots[1:], strict=False):
            if b - a != timedelta(seconds=interval):
                gaps.append(f"{job} {a:%H:%M:%S}->{b:%H:%M:%S}")
    results.append(
        (
            "every slot run or recorded (missed/abandoned)",
            not gaps,
            f"{len(gaps)} gaps" + (f": {gaps[:3]}" if gaps else ""),
        )
    )

    stuck = q(DEAD_RUNNING_SQL)[0][0]
    results.append(("no run left 'running' by a dead node", stuck == 0, f"{stuck} left"))

    unpublished = q(
        "SELECT count(*) FROM publishing_post WHERE status = 'scheduled'"
        " AND publish_at < %s AND last_error = ''",
        (end_db,),
    )[0][0]
    doubles = q(
        "SELECT count(*) FROM (SELECT post_id FROM publishing_publishevent WHERE kind ="
        " 'published' GROUP BY post_id HAVING count(*) > 1) d"
    )[0][0]
    published_without_event = q(
        "SELECT count(*) FROM publishing_post p WHERE status = 'published' AND NOT EXISTS"
        " (SELECT 1 FROM publishing_publishevent e WHERE e.post_id = p.id"
        " AND e.kind = 'published')"
    )[0][0]
    total = q("SELECT count(*) FROM publishing_post WHERE status = 'published'")[0][0]
    results.append(
        (
            "every due post published exactly once",
            unpublished == 0 and doubles == 0 and published_without_event == 0,
            f"{total} published; {unpublished} overdue, {doubles} twice",
        )
    )
    cancelled = q(
        "SELECT count(*) FROM publishing_post p WHERE status = 'draft' AND EXISTS"
        " (SELECT 1 FROM publishing_publishevent e WHERE e.post_id = p.id"
        " AND e.kind = 'published')"
    )[0][0]
    n_cancelled = q("SELECT count(*) FROM publishing_post WHERE status = 'draft'")[0][0]
    results.append(
        ("no cancelled post published", cancelled == 0, f"{n_cancelled} cancelled, {cancelled} out")
    )
    early = (
        q("SELECT count(*) FROM publishing_post WHERE published_at < publish_at")[0][0]
        + q(
            "SELECT count(*) FROM publishing_publishevent WHERE kind = 'published' AND lateness < 0"
        )[0][0]
    )
    results.append(("no post live before its time", early == 0, f"{early} early"))

    dead = [r.name for r in soak.replicas.values() if not r.alive()]
    web_ok = soak.web is not None and soak.web.poll() is None
    results.append(
        (
            "every process not deliberately killed is running",
            not dead and web_ok,
            f"dead: {dead or 'none'}; web {'up' if web_ok else 'DOWN'}",
        )
    )
    term_codes = [f.note for f in soak.faults if f.kind == "term"]
    bad_terms = [n for n in term_codes if "expected" in n]
    results.append(("SIGTERM exits 0", not bad_terms, f"{len(term_codes)} stops"))
    return results


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def report(soak: Soak, results, duration: float) -> bool:
    print(
        f"\nChaos soak: {duration:.0f} s, seed {soak.args.seed}, {soak.args.replicas} replicas,"
        f" {len(soak.faults)} faults, editor ops {dict(soak.editor_ops)}"
        f" ({soak.editor_errors} editor errors)"
    )
    print(f"\n  {'fault':<10} {'count':>5} {'takeover max':>13} {'p95':>7}  notes")
    by_kind = defaultdict(list)
    for fault in soak.faults:
        by_kind[fault.kind].append(fault)
    for kind in FAULT_KINDS:
        faults = by_kind.get(kind, [])
        times = [f.takeover for f in faults if f.takeover is not None]
        missing = sum(1 for f in faults if f.takeover is None and "skipped" not in f.note)
        notes = sorted({f.note for f in faults if f.note and "exit 0" not in f.note})
        tmax = f"{max(times):.2f} s" if times else "-"
        p95 = f"{percentile(times, 95):.2f} s" if times else "-"
        extra = (f"{missing} without takeover; " if missing else "") + "; ".join(notes[:2])
        print(f"  {kind:<10} {len(faults):>5} {tmax:>13} {p95:>7}  {extra}")
    print("\n  invariant                                          held   detail")
    ok = True
    for name, held, detail in results:
        ok &= held
        print(f"  {name:<50} {'yes' if held else 'NO':<6} {detail}")
    takeovers_missing = sum(
        1 for f in soak.faults if f.takeover is None and "skipped" not in f.note
    )
    if takeovers_missing:
        print(f"\n  {takeovers_missing} fault(s) never saw work resume within 30 s")
        ok = False
    print(f"\n  result: {'ALL INVARIANTS HELD' if ok else 'INVARIANT BROKEN'}")
    return ok


# --- main --------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> bool:
    rng = random.Random(args.seed)
    network = Network(args.replicas, tag=str(os.getpid() % 1000))
    network.create()
    workdir = Path(
        subprocess.check_output(["mktemp", "-d", "/tmp/instatic-chaos-XXXX"], text=True).strip()
    )
    hosts = ",".join(["127.0.0.1"] + [network.host_address(i) for i in network.created])
    cluster = PostgresCluster(
        extra_conf={"listen_addresses": f"'{hosts}'", "max_connections": "400"},
        extra_hba=["host all all 10.231.0.0/16 trust"],
    )
    cluster.start()
    soak = None
    try:
        url = cluster.url("instatic")
        with psycopg.connect(cluster.url(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE instatic")
        soak = Soak(args, cluster, network, url, workdir, rng)
        env = soak.env()
        # The editors' stream runs Django in this process, against the same database.
        for key in (
            "DATABASE_URL",
            "DJANGO_SETTINGS_MODULE",
            "INSTATIC_TEST_EXTRA_APPS",
            "INSTATIC_VAR_DIR",
        ):
            os.environ[key] = env[key]
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=BASE_DIR,
            env=env,
            check=True,
        )
        for i in range(1, args.replicas + 1):
            soak.start_replica(i)
        from devtools.servers import free_port

        soak.web_port = free_port()
        soak.web = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{soak.web_port}", "--noreload"],
            cwd=BASE_DIR,
            env={**env, "DJANGO_DEBUG": "1"},
            stdout=open(workdir / "web.log", "wb"),  # noqa: SIM115 - owned by the child
            stderr=subprocess.STDOUT,
        )
        while soak.leader("plugins") is None or soak.leader("publishing") is None:
            time.sleep(0.1)
        stream = threading.Thread(target=editor_stream, args=(soak, args.seed), daemon=True)
        stream.start()
        started = time.monotonic()
        plan = list(FAULT_KINDS)
        while time.monotonic() - started < args.duration:
            time.sleep(rng.uniform(0.5, 2.0))
            if time.monotonic() - started >= args.duration:
                break
            if not plan:
                plan = list(FAULT_KINDS)
                rng.shuffle(plan)
            soak.faults.append(inject(soak, plan.pop()))
        soak.stop_stream.set()
        stream.join(30)
        end_db = soak.db_now()
        # Settle: everything due before the end gets published, leases of killed nodes expire.
        log("settling")
        deadline = time.monotonic() + 30 + 2 * LEASE
        while time.monotonic() < deadline:
            due = soak.query(
                "SELECT count(*) FROM publishing_post WHERE status = 'scheduled'"
                " AND publish_at < %s AND last_error = ''",
                (end_db,),
            )[0][0]
            running = soak.query(DEAD_RUNNING_SQL)[0][0]
            if not due and not running:
                break
            time.sleep(0.5)
        results = check_invariants(soak, end_db)
        # Deliberately stopped replicas were replaced; the rest must stop cleanly now.
        return report(soak, results, time.monotonic() - started)
    finally:
        if soak is not None:
            soak.stop_stream.set()
            for replica in soak.replicas.values():
                if replica.alive():
                    replica.process.send_signal(signal.SIGCONT)
                    replica.process.terminate()
            for replica in soak.replicas.values():
                try:
                    replica.process.wait(20)
                except subprocess.TimeoutExpired:
                    replica.process.kill()
            if soak.web is not None:
                soak.web.terminate()
                soak.web.wait(20)
        cluster.stop()
        network.destroy()
        if not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"logs kept in {workdir}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duration", type=float, default=float(os.environ.get("CHAOS_DURATION", 180))
    )
    parser.add_argument("--seed", type=int, default=int(os.environ.get("CHAOS_SEED", 1)))
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args(argv)
    if not 3 <= args.replicas <= 5:
        parser.error("--replicas must be 3 to 5")
    return 0 if run(args) else 1


if __name__ == "__main__":
    sys.exit(main())
