"""Lease mode behind PgBouncer: how soon a frozen leader's lease passes to another replica.

Three replicas reach a throwaway PostgreSQL only through a real PgBouncer in transaction
pooling mode (``INSTATIC_LOCK_MODE=transaction``, lease 6 s, heartbeat 1 s, tick 1 s), running
the ``hatest`` group (a transactional job every second). Once the leader has run a slot it is
frozen (SIGSTOP), ``BENCH_FREEZES`` (5) times wherever it is, then as many times between the
fence of a run and its commit (``devtools/commit_gate.py``: the run's last update waits for a
lock the benchmark holds, and finishes once the process is stopped). Each time the lease row's
takeover (its new ``acquired_at``) is timed from the freeze by the database clock, beside what
the lease had left when it froze; the frozen process is woken after the takeover and follows.
Target: every takeover within lease + one heartbeat interval of the freeze, every slot's effect
once.

Run: ``python -m bench.lease_takeover``.
"""

import os
import signal
import subprocess
import sys
from collections import Counter

import psycopg

from bench import _report
from bench._harness import BASE_DIR, Replica, env_for, print_table, wait_for
from devtools.commit_gate import WAITING_SQL, install_sql
from devtools.freezing import freeze
from devtools.pgbouncer import PgBouncer, find_binary
from devtools.pgcluster import PostgresCluster

GROUP = "hatest"
LEASE = 6.0
HEARTBEAT = 1.0
SETTINGS = {
    "DJANGO_SETTINGS_MODULE": "tests.settings",
    "INSTATIC_LOCK_MODE": "transaction",
    "INSTATIC_LEASE": str(LEASE),
    "INSTATIC_HEARTBEAT_INTERVAL": str(HEARTBEAT),
    "INSTATIC_MAX_TICK": "1",
}


#: The advisory lock of the commit gate (devtools/commit_gate.py) on the group's job.
GATE = 31032
JOB = "hatest.tick"


def freeze_once(conn, replicas: dict, *, at_commit: bool) -> tuple[float, float]:
    """SIGSTOP the lease's holder; return (takeover, lease left at the freeze) in seconds.

    ``at_commit``: freeze it between its fence and its commit, holding the lease row.
    """
    holder, token = wait_for(
        lambda: conn.execute(
            "SELECT holder, token FROM coordination_locklease WHERE expires_at > now()"
        ).fetchone(),
        60,
    )
    # The holder leads for real before it freezes: it has run a slot since taking the lease.
    wait_for(
        lambda: conn.execute(
            "SELECT 1 FROM coordination_jobrun r JOIN coordination_locklease l ON l.holder = r.node"
            " WHERE r.job = 'hatest.tick' AND r.status = 'succeeded' AND l.token = %s"
            " AND r.started_at > l.acquired_at",
            (token,),
        ).fetchone(),
        60,
    )
    frozen = replicas[holder]
    waiting = None
    if at_commit:
        conn.execute("SELECT pg_advisory_lock(%s)", (GATE,))
        (waiting,) = wait_for(lambda: conn.execute(WAITING_SQL, (GATE,)).fetchone(), 60)
    frozen_at, left = conn.execute(
        "SELECT statement_timestamp(), EXTRACT(EPOCH FROM expires_at - statement_timestamp())"
        " FROM coordination_locklease WHERE token = %s",
        (token,),
    ).fetchone()
    freeze(frozen.process.pid)
    if at_commit:
        conn.execute("SELECT pg_advisory_unlock(%s)", (GATE,))
        wait_for(
            lambda: conn.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND state = 'idle in transaction'",
                (waiting,),
            ).fetchone(),
            60,
        )
    (taken_at,) = wait_for(
        lambda: conn.execute(
            "SELECT acquired_at FROM coordination_locklease WHERE token <> %s", (token,)
        ).fetchone(),
        60,
    )
    os.kill(frozen.process.pid, signal.SIGCONT)
    return (taken_at - frozen_at).total_seconds(), float(left)


def main() -> None:
    if find_binary() is None:
        print("pgbouncer is not installed (apt-get install pgbouncer): nothing measured")
        return
    freezes = int(os.environ.get("BENCH_FREEZES", "5"))
    with PostgresCluster() as cluster:
        with psycopg.connect(cluster.url(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE instatic")
        url = cluster.url("instatic")
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=BASE_DIR,
            env=env_for(url, **SETTINGS),
            check=True,
        )
        with (
            PgBouncer(upstream_port=cluster.port, dbname="instatic") as bouncer,
            psycopg.connect(url, autocommit=True) as conn,
        ):
            for statement in install_sql(job=JOB, key=GATE):
                conn.execute(statement)
            env = env_for(bouncer.url(), **SETTINGS)
            replicas = {f"lt-{i}": Replica(f"lt-{i}", env, GROUP) for i in range(3)}
            try:
                results = {
                    where: [
                        freeze_once(conn, replicas, at_commit=where == "at commit")
                        for _ in range(freezes)
                    ]
                    for where in ("anywhere", "at commit")
                }
            finally:
                for replica in replicas.values():
                    replica.stop()
            effects = Counter(
                slot
                for (slot,) in conn.execute(
                    "SELECT slot FROM jobsapp_effect WHERE job = 'hatest.tick'"
                ).fetchall()
            )
    bound = LEASE + HEARTBEAT
    rows = []
    for where, found in results.items():
        takeovers = [t for t, _ in found]
        _report.samples(f"lease mode: takeover after SIGSTOP {where}", takeovers, unit="s")
        print(
            f"  frozen {where}, per freeze (takeover, lease left at the freeze): "
            + ", ".join(f"({t:.2f}, {left:.2f})" for t, left in found)
        )
        worst = max(takeovers)
        rows += [
            (
                f"takeover, leader frozen {where} (worst of {freezes})",
                f"{worst:.2f} s",
                f"<= {bound:g} s",
                worst <= bound,
            ),
            (f"takeover, frozen {where} (best)", f"{min(takeovers):.2f} s", "-", True),
        ]
    rows.append(("slots run, each once", f"{len(effects)}", "once", max(effects.values()) == 1))
    print_table("bench/lease_takeover.py: lease mode through PgBouncer, leader frozen", rows)
    if not all(ok for *_, ok in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
