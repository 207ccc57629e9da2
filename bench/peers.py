"""Instatic's workers beside a peer: the same burst on procrastinate 3.10, in the same run.

1,000 trivial runs due at one instant, on the same kind of throwaway PostgreSQL, one after
the other in this run:

- **Instatic**: ``bench/workers.py``'s burst, 1,000 claim-first jobs on three replicas each
  ``runscheduler --workers 2`` (start lateness: ``JobRun.started_at - slot``);
- **procrastinate 3.10** (``bench/_peer_app.py``, a bench-only dependency): 1,000 one-off jobs
  of a task that does nothing, deferred beforehand with ``schedule_at`` that instant, on three
  worker processes ``procrastinate worker --concurrency 2`` (start lateness: the job's
  ``started`` event minus its ``scheduled_at``, both the database's clock).

Printed for each: start lateness p50/p99 and the drain rate (runs started per second from
the first start to the last). Target: Instatic's p99 and drain rate ahead of procrastinate's.
``BENCH_PEERS_SCALE`` (1) scales the number of runs.
"""

import os
import subprocess
import sys
import time
from datetime import UTC, datetime

import psycopg

from bench._harness import BASE_DIR, migrated_site, percentile, print_table, wait_for
from bench.workers import burst

SCALE = float(os.environ.get("BENCH_PEERS_SCALE", "1"))
PROCESSES = 3
CONCURRENCY = 2


def procrastinate_burst(jobs: int) -> dict:
    """Run ``jobs`` procrastinate jobs scheduled for one instant on three worker processes;
    return their start lateness (ms) and the drain rate."""
    with migrated_site() as (cluster, url, env):
        env = {**env, "BENCH_PEER_DSN": url, "DJANGO_SETTINGS_MODULE": ""}
        app = [sys.executable, "-m", "procrastinate", "--app=bench._peer_app.app"]
        subprocess.run([*app, "schema", "--apply"], cwd=BASE_DIR, env=env, check=True)
        workers = [
            subprocess.Popen(
                [*app, "worker", f"--concurrency={CONCURRENCY}"],
                cwd=BASE_DIR,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(PROCESSES)
        ]
        conn = psycopg.connect(url, autocommit=True)
        try:
            count = "SELECT count(*) FROM procrastinate_workers"
            wait_for(lambda: conn.execute(count).fetchone()[0] >= PROCESSES, 120, 0.1)
            now = conn.execute("SELECT now()").fetchone()[0].timestamp()
            slot = datetime.fromtimestamp(int(now) + 6, UTC)
            defer = (
                "import sys; from datetime import datetime;"
                " from bench._peer_app import app, noop;"
                " app.open();"
                " noop.configure(schedule_at=datetime.fromisoformat(sys.argv[1]))"
                ".batch_defer(*[{}] * int(sys.argv[2]))"
            )
            subprocess.run(
                [sys.executable, "-c", defer, slot.isoformat(), str(jobs)],
                cwd=BASE_DIR,
                env=env,
                check=True,
            )
            done = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
            wait_for(lambda: conn.execute(done).fetchone()[0] >= jobs, 120, 0.2)
            rows = conn.execute(
                "SELECT extract(epoch FROM e.at - j.scheduled_at), extract(epoch FROM e.at)"
                " FROM procrastinate_jobs j JOIN procrastinate_events e ON e.job_id = j.id"
                " WHERE e.type = 'started'"
            ).fetchall()
        finally:
            conn.close()
            for worker in workers:
                worker.terminate()
            for worker in workers:
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    worker.kill()
    starts = [float(at) for _, at in rows]
    return {
        "lateness_ms": [float(late) * 1000 for late, _ in rows],
        "rate": drain_rate(starts),
    }


def drain_rate(starts: list[float]) -> float:
    """Return the runs started per second from the first start to the last."""
    if len(starts) < 2:
        return float("nan")
    return (len(starts) - 1) / max(max(starts) - min(starts), 1e-9)


def main() -> None:
    started = time.monotonic()
    jobs = max(10, round(1000 * SCALE))
    instatic = burst("workers", jobs)
    instatic_starts = [t for times in instatic["by_worker"].values() for t in times]
    ours = {"lateness_ms": instatic["lateness_ms"], "rate": drain_rate(instatic_starts)}
    peer = procrastinate_burst(jobs)
    o99, p99 = percentile(ours["lateness_ms"], 99), percentile(peer["lateness_ms"], 99)
    rows = [
        (
            f"{jobs} runs, Instatic workers: start lateness p50",
            f"{percentile(ours['lateness_ms'], 50):.0f} ms",
            "measured",
            True,
        ),
        (
            f"{jobs} runs, Instatic workers: start lateness p99",
            f"{o99:.0f} ms",
            "< peer's",
            o99 < p99,
        ),
        (
            f"{jobs} runs, procrastinate 3.10: start lateness p50",
            f"{percentile(peer['lateness_ms'], 50):.0f} ms",
            "peer",
            True,
        ),
        (f"{jobs} runs, procrastinate 3.10: start lateness p99", f"{p99:.0f} ms", "peer", True),
        (
            f"{jobs} runs, Instatic workers: drain",
            f"{ours['rate']:.0f} runs/s",
            "> peer's",
            ours["rate"] > peer["rate"],
        ),
        (f"{jobs} runs, procrastinate 3.10: drain", f"{peer['rate']:.0f} runs/s", "peer", True),
    ]
    print_table(
        f"bench/peers.py: a burst on Instatic's workers and on procrastinate"
        f" ({time.monotonic() - started:.0f} s)",
        rows,
    )
    if not all(ok for *_, ok in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
