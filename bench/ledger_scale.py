"""The engine against a big run ledger: tick cost at a million rows, and retention pruning them.

Issue 16, row 5, on a throwaway PostgreSQL (in a child interpreter, Django set up for it):

1. **Tick cost.** A leading loop of ``BENCH_LEDGER_JOBS`` (1,000) jobs, nothing due: the
   median of ``GroupLoop.tick()`` (the lock check and the state read with its in-progress
   probe per job) with an empty ledger (the same-run baseline), then with
   ``BENCH_LEDGER_ROWS`` (1,200,000) finished rows spread over the jobs. Target: <= 1.2x.
   The same for one claim-first run's bookkeeping (claim, then outcome). Measured only: the
   idle tick at 10, 100 and 1,000 jobs (the report's cost curve).
2. **Retention.** ``prune_runs(keep=200)`` deletes a million of those rows in a process of its own
   while this one claims and finishes runs back to back: each run's bookkeeping time during
   the prune, against the same loop just before it (baseline). Target: no run held up more
   than 100 ms (the worst run minus the baseline's worst).
"""

import json
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
TARGET_TICK_RATIO = 1.2
TARGET_BLOCK_MS = 100.0
KEEP = 200


def main() -> int:
    if sys.argv[1:2] == ["--database"]:
        return measure()
    if sys.argv[1:2] == ["--prune"]:
        return prune()
    import psycopg

    from bench._harness import env_for
    from devtools.pgcluster import PostgresCluster

    with PostgresCluster() as cluster:
        with psycopg.connect(cluster.url(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE instatic")
        url = cluster.url("instatic")
        return subprocess.call(
            [sys.executable, "-m", "bench.ledger_scale", "--database", url],
            cwd=BASE_DIR,
            env=env_for(url),
        )


def _median_ms(action, runs: int) -> float:
    action()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def leading_loop(group: str, jobs: int):
    """Return a scheduler loop of ``jobs`` hourly jobs in ``group``, leading, states created."""
    from coordination.registry import JobRegistry, make_job
    from coordination.scheduler import Scheduler
    from coordination.schedules import every

    registry = JobRegistry()
    for n in range(jobs):
        registry.register(
            make_job(
                lambda ctx: None,
                name=f"{group}.job_{n:04d}",
                group=group,
                schedule=every(timedelta(hours=1)),
            )
        )
    scheduler = Scheduler(groups=[group], node_name=f"bench-{group}", registry=registry)
    scheduler.register()
    loop = scheduler.loops[0]
    assert loop.supervision.try_lead(wait=0), "the benchmark's loop must lead its group"
    loop.tick()  # maintenance: the job states are created
    return loop, registry


def fill_ledger(names: list[str], total: int) -> None:
    """COPY ``total`` finished runs, spread evenly over ``names``, one slot a minute back."""
    from django.db import connection

    now = time.time()
    per_job = total // len(names)
    with connection.cursor() as cursor:
        with cursor.cursor.copy(
            "COPY coordination_jobrun (job, slot, status, trigger, node, node_instance, attempt,"
            " started_at, finished_at, duration, error, requested_by, reason)"
            " FROM STDIN"
        ) as copy:
            from datetime import UTC, datetime

            base = datetime.fromtimestamp(now - 3600, UTC).replace(second=0, microsecond=0)
            for name in names:
                for i in range(per_job):
                    slot = base - timedelta(minutes=i)
                    copy.write_row(
                        (
                            name,
                            slot,
                            "succeeded",
                            "schedule",
                            "n",
                            "i",
                            1,
                            slot,
                            slot,
                            0.1,
                            "",
                            "",
                            "",
                        )
                    )
        cursor.execute("VACUUM ANALYZE coordination_jobrun")


class RunBookkeeping:
    """One claim-first run's engine writes, timed: claim its slot, then record its outcome."""

    def __init__(self, registry, names: list[str]):
        from coordination.clock import database_now

        self.jobs = [registry.get(name) for name in names]
        self.slot = database_now().replace(second=0, microsecond=0) + timedelta(days=1)
        self.count = 0

    def __call__(self) -> None:
        from coordination import ledger
        from coordination.models import JobRun

        job = self.jobs[self.count % len(self.jobs)]
        slot = self.slot + timedelta(seconds=self.count)
        self.count += 1
        claimed = ledger.claim_scheduled(
            [(job, slot, slot + timedelta(hours=1))], node="bench", instance="bench"
        )
        ledger.finish_with_state(
            claimed[job.name],
            job,
            status=JobRun.Status.SUCCEEDED,
            duration=0.001,
            error="",
            instance="bench",
            retry_at=None,
            slot=slot,
            lateness=0.0,
            node="bench",
            next_due=None,
        )


def prune() -> int:
    """Prune the ledger to ``KEEP`` runs a job; print the rows deleted and the seconds (JSON)."""
    import django

    django.setup()
    from plugins.builtin.retention import prune_runs

    began = time.perf_counter()
    deleted = sum(prune_runs(keep=KEEP).values())
    print(json.dumps({"deleted": deleted, "seconds": time.perf_counter() - began}))
    return 0


def measure() -> int:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from bench import _report
    from bench._harness import percentile, print_table
    from coordination.models import JobRun

    call_command("migrate", verbosity=0)
    jobs = int(os.environ.get("BENCH_LEDGER_JOBS", "1000"))
    rows = int(os.environ.get("BENCH_LEDGER_ROWS", "1200000"))

    curve = []
    for size in (10, 100, jobs):
        loop, _ = leading_loop(f"ticks{size}", size)
        curve.append((size, _median_ms(loop.tick, 30)))
    print("idle tick by number of jobs: " + ", ".join(f"{n}: {ms:.1f} ms" for n, ms in curve))

    loop, registry = leading_loop("ledger", jobs)
    names = [job.name for job in registry.all()]
    bookkeeping = RunBookkeeping(registry, names)
    with connection.cursor() as cursor:  # as after the fill: fresh statistics, no dead rows
        cursor.execute("VACUUM ANALYZE")
    empty_tick = _median_ms(loop.tick, 50)
    empty_run = _median_ms(bookkeeping, 50)

    started = time.perf_counter()
    fill_ledger(names, rows)
    print(f"{JobRun.objects.count()} ledger rows in {time.perf_counter() - started:.0f} s")
    full_tick = _median_ms(loop.tick, 50)
    full_run = _median_ms(bookkeeping, 50)

    # Retention: the runs' bookkeeping back to back, first alone, then beside the prune.
    def latencies(until) -> list[float]:
        out = []
        while not until():
            began = time.perf_counter()
            bookkeeping()
            out.append((time.perf_counter() - began) * 1000)
        return out

    alone_until = time.monotonic() + 10
    alone = latencies(lambda: time.monotonic() >= alone_until)
    # The prune runs in a process of its own, as it would on the plugin leader: what is
    # measured is what the database makes a run wait for, not this interpreter's GIL.
    pruner = subprocess.Popen(
        [sys.executable, "-m", "bench.ledger_scale", "--prune"],
        cwd=BASE_DIR,
        stdout=subprocess.PIPE,
        text=True,
    )
    beside = latencies(lambda: pruner.poll() is not None)
    result = json.loads(pruner.communicate()[0].strip().splitlines()[-1])
    loop.lock.close()

    tick_ratio = full_tick / empty_tick
    run_ratio = full_run / empty_run
    blocked = max(beside) - max(alone)
    table = [
        (
            f"idle tick, {jobs} jobs, {rows:,} rows",
            f"{full_tick:.1f} ms",
            f"<= {TARGET_TICK_RATIO}x",
            tick_ratio <= TARGET_TICK_RATIO,
        ),
        ("  (empty ledger, same run)", f"{empty_tick:.1f} ms", f"ratio {tick_ratio:.2f}", True),
        (
            "claim + outcome of one run",
            f"{full_run:.2f} ms",
            f"<= {TARGET_TICK_RATIO}x",
            run_ratio <= TARGET_TICK_RATIO,
        ),
        ("  (empty ledger, same run)", f"{empty_run:.2f} ms", f"ratio {run_ratio:.2f}", True),
        (
            f"retention: {result.get('deleted', 0):,} rows pruned",
            f"{result.get('seconds', 0):.1f} s",
            "measured",
            True,
        ),
        (
            "worst run beside the prune",
            f"{max(beside):.1f} ms",
            f"<= +{TARGET_BLOCK_MS:.0f} ms",
            blocked <= TARGET_BLOCK_MS,
        ),
        ("  (worst run alone, same run)", f"{max(alone):.1f} ms", f"+{blocked:.1f} ms", True),
    ]
    print_table("bench/ledger_scale.py: the engine beside a big run ledger (PostgreSQL)", table)
    print(
        f"  runs beside the prune: {len(beside)}, p50 {percentile(beside, 50):.2f} ms,"
        f" p99 {percentile(beside, 99):.2f} ms; alone: {len(alone)},"
        f" p50 {percentile(alone, 50):.2f} ms, p99 {percentile(alone, 99):.2f} ms"
    )
    _report.figure(
        f"idle tick, {jobs} jobs, {rows:,} ledger rows",
        full_tick,
        unit="ms",
        baseline=empty_tick,
        baseline_name="empty ledger",
        target=f"<= {TARGET_TICK_RATIO}x",
        ok=tick_ratio <= TARGET_TICK_RATIO,
    )
    _report.figure(
        f"claim + outcome of one run, {rows:,} ledger rows",
        full_run,
        unit="ms",
        baseline=empty_run,
        baseline_name="empty ledger",
        target=f"<= {TARGET_TICK_RATIO}x",
        ok=run_ratio <= TARGET_TICK_RATIO,
    )
    _report.figure(
        "worst run's bookkeeping while retention prunes",
        max(beside),
        unit="ms",
        baseline=max(alone),
        baseline_name="worst run alone",
        target=f"<= baseline + {TARGET_BLOCK_MS:.0f} ms",
        ok=blocked <= TARGET_BLOCK_MS,
        note=f"{result.get('deleted', 0):,} rows pruned in {result.get('seconds', 0):.1f} s",
    )
    _report.samples("run bookkeeping beside the prune", beside, unit="ms")
    _report.samples("run bookkeeping alone", alone, unit="ms")
    _report.series(
        "idle tick against number of jobs",
        curve,
        x_label="jobs in the group",
        y_label="median tick (ms)",
        label="empty ledger",
    )
    ok = all(passed for *_, passed in table)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
