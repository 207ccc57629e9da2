"""Scheduler benchmark: three real replicas on a throwaway PostgreSQL.

Prints database statements per replica per minute while idle (target <= 60), takeover after
SIGKILL (target <= 2 s, the worst of ``BENCH_TAKEOVERS`` (10) kills, each followed by a fresh
replica; their histogram goes to the report), after a freeze (target <= lease + 2 s), after
SIGTERM (target <= 1 s), and the peak RSS of one ``runscheduler`` (target <= 80 MB).
Statements are counted from the server's own statement log, attributed by
``application_name`` (``<node>/lock``, ``<node>/work``), so nothing in the product is
instrumented for the benchmark.

Run: ``python -m bench.scheduler`` (or ``make bench``). ``BENCH_IDLE_SECONDS`` sets the idle
window (default 60).
"""

import os
import signal
import time
from collections import Counter

import psycopg

from bench import _report
from bench._harness import (
    STATEMENT,  # noqa: F401  (bench.jobs_per_minute imports it from here)
    STATEMENT_LOG,
    Replica,
    leader,
    migrated_site,
    print_table,
    statements_by_node,
    statements_while_idle,
    wait_for,
)
from devtools import freezing

LEASE = 10.0


def registered(conn, name: str) -> bool:
    """Return True once the node ``name`` has registered and heartbeated."""
    return bool(
        conn.execute(
            "SELECT 1 FROM coordination_node WHERE name = %s AND stopped_at IS NULL", (name,)
        ).fetchone()
    )


def measure_takeover(conn, replicas: dict, action) -> float:
    old = wait_for(lambda: leader(conn), 30)
    victim = replicas[old]
    start = time.monotonic()
    action(victim)
    wait_for(lambda: (name := leader(conn)) and name != old, 60)
    return time.monotonic() - start


def main() -> None:
    idle_seconds = float(os.environ.get("BENCH_IDLE_SECONDS", "60"))
    with migrated_site(STATEMENT_LOG, INSTATIC_LEASE=str(LEASE)) as (cluster, url, env):
        replicas = {f"bench-{i}": Replica(f"bench-{i}", env) for i in range(1, 4)}
        conn = psycopg.connect(url, autocommit=True, application_name="bench")
        try:
            matches = statements_while_idle(cluster, conn, idle_seconds, lease=LEASE, timeout=30)
            counts = statements_by_node(matches)
            busiest = max(counts, key=counts.get) if counts else None
            kinds = Counter(m.group(2) for m in matches if m.group(1).startswith(f"{busiest}/"))
            per_minute = {n: counts.get(n, 0) * 60 / idle_seconds for n in replicas}
            rss = max(r.peak_rss_mb() for r in replicas.values())

            # A distribution, not one sample: SIGKILL the leader again and again, each time
            # starting a fresh replica so three stay up (the report's takeover histogram).
            kills = []
            for n in range(int(os.environ.get("BENCH_TAKEOVERS", "10"))):
                kills.append(measure_takeover(conn, replicas, lambda r: r.process.kill()))
                fresh = Replica(f"bench-k{n}", env)
                replicas[fresh.name] = fresh
                wait_for(lambda name=fresh.name: registered(conn, name), 60)
            kill = max(kills, default=0.0)
            freeze_victim = {}

            def freeze(r):
                freeze_victim["r"] = r
                freezing.freeze(r.process.pid)

            freeze_time = measure_takeover(conn, replicas, freeze)
            os.kill(freeze_victim["r"].process.pid, signal.SIGCONT)
            term = measure_takeover(conn, replicas, lambda r: r.process.terminate())
        finally:
            conn.close()
            for replica in replicas.values():
                replica.stop()

    rows = [
        (
            "idle statements / replica / min (max)",
            f"{max(per_minute.values()):.0f}",
            "<= 60",
            max(per_minute.values()) <= 60,
        ),
        (f"takeover after SIGKILL (worst of {len(kills)})", f"{kill:.2f} s", "<= 2 s", kill <= 2),
        (
            f"takeover after freeze (lease {LEASE:.0f} s)",
            f"{freeze_time:.2f} s",
            f"<= {LEASE + 2:.0f} s",
            freeze_time <= LEASE + 2,
        ),
        ("takeover after SIGTERM", f"{term:.2f} s", "<= 1 s", term <= 1),
        ("peak RSS of one runscheduler", f"{rss:.1f} MB", "<= 80 MB", rss <= 80),
    ]
    if os.environ.get("BENCH_SHOW_STATEMENTS"):
        print(f"  statements of the busiest replica ({busiest}) while idle:")
        for sql, n in kinds.most_common(15):
            print(f"    {n:4d}  {sql}")
    print_table("bench/scheduler.py: three replicas on a throwaway PostgreSQL 15", rows)
    print(
        "  idle statements/min per replica: "
        + ", ".join(f"{n}={v:.0f}" for n, v in per_minute.items())
    )
    _report.samples("takeover after SIGKILL of the leader", kills, unit="s", plot="histogram")
    _report.series(
        "idle statements per replica per minute",
        [(i + 1, v) for i, v in enumerate(sorted(per_minute.values(), reverse=True))],
        x_label="replica (busiest first)",
        y_label="statements / min",
        label="3 replicas idle",
    )
    if not all(ok for *_, ok in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
