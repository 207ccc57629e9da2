"""Idle cost against the number of replicas: statements per replica per minute at 3 and 10.

For each count in ``BENCH_REPLICA_COUNTS`` (``3,10``) a fresh throwaway
PostgreSQL and that many idle ``runscheduler`` replicas (both groups, nothing due); after
start-up settles, every statement of ``BENCH_IDLE_SECONDS`` (60) is counted from the server's
log by ``application_name``, as in ``bench/scheduler.py`` (``bench/_harness.py`` does both).
Targets: every replica <= 60 a minute, and the busiest replica at the largest count <= 1.2x
the busiest at the smallest (the same-run baseline): a replica's idle cost must not grow with
the cluster.
"""

import os

import psycopg

from bench import _report
from bench._harness import (
    STATEMENT_LOG,
    Replica,
    migrated_site,
    print_table,
    statements_by_node,
    statements_while_idle,
)

LEASE = 10.0
TARGET_PER_MINUTE = 60.0
TARGET_GROWTH = 1.2


def idle_statements(count: int, seconds: float) -> dict[str, float]:
    """Return each replica's statements per minute while ``count`` replicas idle."""
    with migrated_site(STATEMENT_LOG, INSTATIC_LEASE=str(LEASE)) as (cluster, url, env):
        replicas = [Replica(f"idle{count}-{i}", env) for i in range(1, count + 1)]
        conn = psycopg.connect(url, autocommit=True, application_name="bench")
        try:
            matches = statements_while_idle(cluster, conn, seconds, lease=LEASE)
        finally:
            conn.close()
            for replica in replicas:
                replica.stop()
    counts = statements_by_node(matches)
    return {r.name: counts.get(r.name, 0) * 60 / seconds for r in replicas}


def main() -> None:
    seconds = float(os.environ.get("BENCH_IDLE_SECONDS", "60"))
    sizes = [int(n) for n in os.environ.get("BENCH_REPLICA_COUNTS", "3,10").split(",")]
    results = {n: idle_statements(n, seconds) for n in sizes}
    busiest = {n: max(per.values()) for n, per in results.items()}
    smallest, largest = min(sizes), max(sizes)
    growth = busiest[largest] / busiest[smallest] if busiest[smallest] else float("inf")
    rows = [
        (
            f"idle statements / replica / min, {n} replicas (busiest)",
            f"{busiest[n]:.0f}",
            f"<= {TARGET_PER_MINUTE:.0f}",
            busiest[n] <= TARGET_PER_MINUTE,
        )
        for n in sizes
    ]
    rows.append(
        (
            f"busiest at {largest} vs at {smallest} replicas",
            f"{growth:.2f}x",
            f"<= {TARGET_GROWTH}x",
            growth <= TARGET_GROWTH,
        )
    )
    print_table("bench/replicas.py: idle replicas on a throwaway PostgreSQL", rows)
    for n, per in results.items():
        mean = sum(per.values()) / len(per)
        print(
            f"  {n} replicas: mean {mean:.1f}/min; " + ", ".join(f"{v:.0f}" for v in per.values())
        )
    _report.figure(
        f"idle statements / replica / min, {largest} replicas",
        busiest[largest],
        unit="statements",
        baseline=busiest[smallest],
        baseline_name=f"{smallest} replicas",
        target=f"<= {TARGET_PER_MINUTE:.0f} and <= {TARGET_GROWTH}x",
        ok=busiest[largest] <= TARGET_PER_MINUTE and growth <= TARGET_GROWTH,
    )
    _report.series(
        "idle statements per replica per minute against replicas",
        [(n, busiest[n]) for n in sizes],
        x_label="replicas",
        y_label="statements / replica / min",
        label="busiest replica (the leader of both groups)",
    )
    _report.series(
        "idle statements per replica per minute against replicas",
        [(n, sum(per.values()) / len(per)) for n, per in results.items()],
        x_label="replicas",
        y_label="statements / replica / min",
        label="mean over replicas",
    )
    if not all(ok for *_, ok in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
