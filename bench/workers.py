"""Runs on worker processes: bursts, CPU-bound runs, the queue's wait and the idle cost.

Each part runs on a fresh throwaway PostgreSQL with real ``runscheduler`` / ``runworker``
processes and the bench-only plugin jobs of ``bench/_jobsapp`` (``run_on`` from
``BENCH_RUN_ON``); every figure stands beside its same-run baseline:

1. **A burst**: 1,000 claim-first jobs due at one instant (every ``PERIOD`` s), three
   replicas each ``runscheduler --workers 2``: start lateness (``JobRun.started_at - slot``,
   the database's clock) p50/p99, target p99 <= 500 ms and <= 3x the baseline's, beside the
   lateness each run's function saw as it began, and duplicate runs (ledger rows and
   the jobs' own effect lines), target 0. Baseline: the same jobs ``run_on="leader"`` on
   three replicas ``--workers 0``. Where the time goes: the leader's queueing
   (``queued_at - slot``), the wait in the queue (``started_at - queued_at``), the rate the
   worker processes drained it at, and the statements per run from the server's log.
2. **CPU-bound runs**: 60 runs of ~1 s of pure-Python work each (``bench._cpu.burn``,
   calibrated here first), requested at once, on a worker-only node ``runworker
   --processes N`` (N = 1, 2, 4) beside a ``runscheduler --workers 0``: wall time from the
   request to the last run's end, throughput. Baseline: the same runs ``run_on="leader"``
   (threads of one interpreter). Target: >= 1.8x the baseline's throughput with 2 workers.
   Where the time goes: each run's own duration against the calibrated second (CPU shared
   with something else stretches it) and the workers' busy share of the wall time.
3. **The queue's wait on an idle cluster**: one ``ping`` job run on request ``N`` times, one
   replica with one idle worker: ``started_at - queued_at`` p50/p99, target p99 <= 50 ms.
   Baseline: a ``SELECT 1`` round trip on the same kind of connection.
4. **Idle statements per replica per minute**: 1 and 3 idle replicas each ``--workers 2``
   against the same with ``--workers 0``, counted from the server's statement log by
   ``application_name`` (``bench/_harness.py``; a worker's sessions count for its replica).
   Target <= 60, and the busiest replica at 3 within 1.2x of the busiest at 1. The four
   clusters idle side by side (idling costs no CPU to speak of), so this part takes one
   window, not four.

``BENCH_WORKERS_SCALE`` (1) scales the counts and the idle window for quick runs
(``BENCH_WORKERS_SCALE=0.2 python -m bench.workers``); ``BENCH_WORKERS_PARTS``
(``burst,cpu,queue,idle``) picks parts.
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bench import _cpu_usage, _report
from bench._cpu import calibrate
from bench._harness import (
    BASE_DIR,
    STATEMENT,
    STATEMENT_LOG,
    Replica,
    leader,
    migrated_site,
    percentile,
    print_table,
    statements_by_node,
    statements_while_idle,
    wait_for,
)
from bench.jobs_per_minute import read_effects

SCALE = float(os.environ.get("BENCH_WORKERS_SCALE", "1"))
PARTS = os.environ.get("BENCH_WORKERS_PARTS", "burst,cpu,queue,idle").split(",")
LEASE = 10.0
REPLICAS = 3
WORKERS_PER_REPLICA = 2
#: The burst jobs' period: every multiple of it, all of them are due.
PERIOD = 20
TARGET_LATENESS_MS = 500.0
#: Workers' start lateness p99 at most this many times the leader's, in the same run.
TARGET_RATIO = 3.0
TARGET_SPEEDUP = 1.8
TARGET_QUEUE_WAIT_MS = 50.0
TARGET_IDLE = 60.0
TARGET_GROWTH = 1.2
FINISHED = ("succeeded", "failed", "timed_out", "abandoned", "missed")


def scaled(n: int, least: int = 1) -> int:
    return max(least, round(n * SCALE))


def db_now(conn) -> datetime:
    return conn.execute("SELECT now()").fetchone()[0]


def site(**env: str):
    """A migrated throwaway site with the bench jobs (``bench._settings``), statement log on."""
    env = {
        "DJANGO_SETTINGS_MODULE": "bench._settings",
        "INSTATIC_LEASE": str(LEASE),
        "BENCH_JOBS": "0",
        **env,
    }
    return migrated_site(STATEMENT_LOG, **env)


def wait_until_ready(conn, *, states: int, pattern: str, listening: int) -> None:
    """Wait for the plugins group's leader, ``states`` job states named like ``pattern`` and
    ``listening`` idle worker processes (each holds a ``LISTEN`` session ``.../listen``)."""
    wait_for(lambda: leader(conn, "plugins"), 120, 0.1)
    count = "SELECT count(*) FROM coordination_jobstate WHERE name LIKE %s"
    wait_for(lambda: conn.execute(count, (pattern,)).fetchone()[0] == states, 120, 0.1)
    listeners = "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE '%%/listen'"
    wait_for(lambda: conn.execute(listeners).fetchone()[0] >= listening, 120, 0.1)


class Requester:
    """``python -m bench._request``: runs on request through ``coordination.services``."""

    def __init__(self, env: dict):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench._request"],
            cwd=BASE_DIR,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def request(self, names: list[str]) -> None:
        self.process.stdin.write(" ".join(names) + "\n")
        self.process.stdin.flush()
        if self.process.stdout.readline().strip() != "ok":
            raise RuntimeError(f"requesting runs of {names[:3]}... failed")

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(30)


def statement_counts(cluster, offset: int) -> Counter:
    """Count the statements logged since ``offset`` by ``application_name``."""
    with open(cluster.workdir / "server.log", errors="replace") as f:
        f.seek(offset)
        return Counter(m.group(1) for m in STATEMENT.finditer(f.read()))


# --- 1. a burst of 1,000 jobs due at one instant ------------------------------------------


def burst(run_on: str, jobs: int) -> dict:
    """Run ``jobs`` jobs due at one instant on three replicas; return the measured slot's runs."""
    workers = WORKERS_PER_REPLICA if run_on == "workers" else 0
    effects = Path(tempfile.mkdtemp(prefix="instatic-bench-effects-"))
    with site(
        BENCH_JOBS=str(jobs),
        BENCH_RUN_ON=run_on,
        BENCH_PERIOD_SECONDS=str(PERIOD),
        BENCH_EFFECTS_DIR=str(effects),
    ) as (cluster, url, env):
        names = [f"burst-{run_on}-{i}" for i in range(1, REPLICAS + 1)]
        replicas = [
            Replica(name, env, "plugins", extra_args=(f"--workers={workers}",), name_sessions=True)
            for name in names
        ]
        conn = psycopg.connect(url, autocommit=True, application_name="bench")
        try:
            wait_until_ready(
                conn, states=jobs, pattern="benchjobs.job_%", listening=REPLICAS * workers
            )
            now = db_now(conn).timestamp()
            slot = datetime.fromtimestamp((int(now + 5) // PERIOD + 1) * PERIOD, UTC)
            time.sleep(max(0.0, slot.timestamp() - 2 - db_now(conn).timestamp()))
            offset = (cluster.workdir / "server.log").stat().st_size
            cpu_before = cpu_snapshot(cluster, replicas)
            done = (
                "SELECT count(*) FROM coordination_jobrun WHERE slot = %s"
                " AND job LIKE 'benchjobs.job_%%' AND status = ANY(%s)"
            )
            try:
                wait_for(
                    lambda: conn.execute(done, (slot, list(FINISHED))).fetchone()[0] >= jobs,
                    90,
                    0.2,
                )
            except TimeoutError:
                print(f"  {run_on}: not every run of the slot finished within 90 s")
            cpu = {k: v - cpu_before[k] for k, v in cpu_snapshot(cluster, replicas).items()}
            statements = statement_counts(cluster, offset)
            rows = conn.execute(
                "SELECT job, node, status, extract(epoch FROM started_at - slot),"
                " extract(epoch FROM queued_at - slot), extract(epoch FROM started_at - queued_at),"
                " extract(epoch FROM finished_at - started_at)"
                " FROM coordination_jobrun WHERE slot = %s AND job LIKE 'benchjobs.job_%%'",
                (slot,),
            ).fetchall()
            # The task rows' own times: enqueued (the leader's insert) and taken by a worker.
            tasks = conn.execute(
                "SELECT extract(epoch FROM t.enqueued_at - r.slot),"
                " extract(epoch FROM t.started_at - r.slot)"
                " FROM django_tasks_database_dbtaskresult t JOIN coordination_jobrun r"
                " ON r.id = (t.args_kwargs->'args'->>0)::bigint"
                " WHERE r.slot = %s AND r.job LIKE 'benchjobs.job_%%'",
                (slot,),
            ).fetchall()
            ledger_dupes = conn.execute(
                "SELECT count(*) FROM (SELECT job, slot FROM coordination_jobrun"
                " GROUP BY job, slot HAVING count(*) > 1) d"
            ).fetchone()[0]
        finally:
            conn.close()
            for replica in replicas:
                replica.stop()
    lines = read_effects(effects)
    shutil.rmtree(effects, ignore_errors=True)
    seen = Counter((job, slot) for job, slot, _, _ in lines)
    ms = lambda values: [v * 1000 for v in values if v is not None]  # noqa: E731
    by_worker: dict[str, list[float]] = {}  # each run's start, seconds after its slot
    for row in rows:
        if row[3] is not None:
            by_worker.setdefault(row[1], []).append(float(row[3]))
    return {
        "run_on": run_on,
        "jobs": jobs,
        "runs": len(rows),
        "statuses": Counter(row[2] for row in rows),
        "lateness_ms": ms(float(r[3]) for r in rows if r[3] is not None),
        "queueing_ms": ms(float(r[4]) if r[4] is not None else None for r in rows),
        "queue_wait_ms": ms(float(r[5]) if r[5] is not None else None for r in rows),
        "enqueued_ms": ms(float(t[0]) if t[0] is not None else None for t in tasks),
        "task_taken_ms": ms(float(t[1]) if t[1] is not None else None for t in tasks),
        "run_ms": ms(float(r[6]) if r[6] is not None else None for r in rows),
        "duplicates": sum(n - 1 for n in seen.values() if n > 1) + ledger_dupes,
        # When each run's function began, as the job itself saw it (wall clock of the
        # machine, which the bench shares with the database): a run taken ahead of a free
        # thread is in the ledger as started before its function begins.
        # Only the measured slot's: a run of an earlier slot (one the replicas caught up on as
        # they started) is late by the start-up, not by the burst.
        "seen_ms": [lateness * 1000 for _, at, _, lateness in lines if at == slot],
        "by_worker": by_worker,
        "statements": statements,
        "nodes": names,
        "cpu": cpu,
    }


def cpu_snapshot(cluster, replicas: list[Replica]) -> dict[str, float]:
    """Return the CPU seconds used so far by the schedulers, their worker processes, the
    PostgreSQL server, and the whole machine (busy and all core-seconds)."""
    tree = _cpu_usage.children()
    pids = [r.process.pid for r in replicas]
    workers = [child for pid in pids for child in _cpu_usage.descendants(pid, tree)]
    postmaster = _cpu_usage.postmaster_pid(cluster)
    busy, total = _cpu_usage.machine_busy()
    return {
        "schedulers": _cpu_usage.cpu_seconds(pids),
        "worker processes": _cpu_usage.cpu_seconds(workers),
        "PostgreSQL": _cpu_usage.cpu_seconds(
            [postmaster, *_cpu_usage.descendants(postmaster, tree)]
        ),
        "machine busy": busy,
        "machine": total,
    }


def report_bursts(workers: dict, leaders: dict) -> list[tuple]:
    p50, p99 = (percentile(workers["lateness_ms"], q) for q in (50, 99))
    b50, b99 = (percentile(leaders["lateness_ms"], q) for q in (50, 99))
    jobs = workers["jobs"]
    rows = [
        (f"{jobs} jobs on workers: start lateness p50", f"{p50:.0f} ms", "measured", True),
        (
            f"{jobs} jobs on workers: start lateness p99",
            f"{p99:.0f} ms",
            f"<= {TARGET_LATENESS_MS:.0f} ms",
            p99 <= TARGET_LATENESS_MS,
        ),
        (f"{jobs} jobs on the leader: start lateness p50", f"{b50:.0f} ms", "baseline", True),
        (f"{jobs} jobs on the leader: start lateness p99", f"{b99:.0f} ms", "baseline", True),
        (
            f"{jobs} jobs: workers' p99 / the leader's p99",
            f"{p99 / max(b99, 1e-9):.2f}x",
            f"<= {TARGET_RATIO:g}x",
            p99 <= TARGET_RATIO * b99,
        ),
    ]
    s99, sb99 = (percentile(r["seen_ms"], 99) for r in (workers, leaders))
    rows += [
        (f"{jobs} jobs on workers: p99 as the job saw it", f"{s99:.0f} ms", "measured", True),
        (f"{jobs} jobs on the leader: p99 as the job saw it", f"{sb99:.0f} ms", "baseline", True),
        (
            f"{jobs} jobs: workers' / leader's p99 as the jobs saw it",
            f"{s99 / max(sb99, 1e-9):.2f}x",
            f"<= {TARGET_RATIO:g}x",
            s99 <= TARGET_RATIO * sb99,
        ),
    ]
    for r in (workers, leaders):
        rows.append(
            (
                f"{jobs} jobs on the {r['run_on']}: duplicate runs",
                str(r["duplicates"]),
                "0",
                r["duplicates"] == 0,
            )
        )
        rows.append(
            (
                f"{jobs} jobs on the {r['run_on']}: runs of the slot that finished",
                str(sum(r["statuses"][s] for s in FINISHED)),
                str(jobs),
                sum(r["statuses"][s] for s in FINISHED) == jobs,
            )
        )
    for label, r in (("workers", workers), ("leader", leaders)):
        _report.samples(f"{jobs} jobs due at once, run_on={label}", r["lateness_ms"], unit="ms")
    _report.figure(
        f"start lateness p99, {jobs} jobs due at once on workers ({REPLICAS} replicas x"
        f" {WORKERS_PER_REPLICA})",
        p99,
        unit="ms",
        baseline=b99,
        baseline_name="run_on=leader",
        target=f"<= {TARGET_LATENESS_MS:.0f} ms",
        ok=p99 <= TARGET_LATENESS_MS,
    )
    _report.figure(
        f"start lateness p50, {jobs} jobs due at once on workers",
        p50,
        unit="ms",
        baseline=b50,
        baseline_name="run_on=leader",
    )
    _report.figure(
        f"duplicate runs, {jobs} jobs on workers",
        workers["duplicates"],
        target="0",
        ok=workers["duplicates"] == 0,
    )
    return rows


def explain_burst(r: dict) -> None:
    """Print where a burst's start lateness goes (measured from the ledger and the log)."""
    print(f"\n  where the time goes, {r['jobs']} jobs run_on={r['run_on']}:")
    for label, key in (
        ("slot -> queued (leader plans, claims, queues)", "queueing_ms"),
        ("slot -> task rows inserted (the queueing's last statement)", "enqueued_ms"),
        ("slot -> task taken (a worker's claim of the task rows)", "task_taken_ms"),
        ("queued -> started (wait in the queue)", "queue_wait_ms"),
        ("started -> finished (the run)", "run_ms"),
    ):
        values = r[key]
        if values:
            print(
                f"    {label}: p50 {percentile(values, 50):.0f} ms, p99"
                f" {percentile(values, 99):.0f} ms, max {max(values):.0f} ms (n={len(values)})"
            )
    starts = [t for ts in r["by_worker"].values() for t in ts]
    if len(starts) > 1:
        span = max(starts) - min(starts)
        print(
            f"    starts spread over {span * 1000:.0f} ms on {len(r['by_worker'])} node(s):"
            f" {len(starts) / span if span else float('inf'):.0f} starts/s in all"
        )
        for node, ts in sorted(r["by_worker"].items()):
            # The runs of one claim share their start (the claim's statement time).
            claims = sorted(Counter(round(t * 1000) for t in ts).items())
            shown = ", ".join(f"+{at} ms x{n}" for at, n in claims[:8])
            more = f" and {len(claims) - 8} more" if len(claims) > 8 else ""
            print(f"      {node}: {len(ts)} runs in {len(claims)} claim(s): {shown}{more}")
    runs = max(1, r["runs"])
    sessions = Counter()
    for app, n in r["statements"].items():
        node, _, session = app.partition("/")
        if node in r["nodes"]:
            sessions[re.sub(r"worker-\d+", "worker-N", session)] += n
    print(
        "    statements per run in the window, by session (<node>/...; 'unnamed': sessions"
        " without an application_name, the worker processes' work sessions among them): "
        + ", ".join(f"{kind} {n / runs:.2f}" for kind, n in sorted(sessions.items()))
    )
    cpu = r["cpu"]
    span = cpu["machine"] / (os.cpu_count() or 1)
    print(
        f"    CPU seconds in the window ({span:.1f} s on {os.cpu_count()} cores): "
        + ", ".join(f"{k} {cpu[k]:.2f}" for k in ("schedulers", "worker processes", "PostgreSQL"))
        + f"; the machine was busy {cpu['machine busy'] / cpu['machine'] * 100:.0f}%;"
        f" per run: {(cpu['worker processes'] + cpu['schedulers']) / runs * 1000:.1f} ms of"
        f" Instatic's processes, {cpu['PostgreSQL'] / runs * 1000:.1f} ms of PostgreSQL's"
    )


# --- 2. CPU-bound runs -----------------------------------------------------------------------


def cpu_wall(run_on: str, processes: int, runs: int, loops: int) -> dict:
    """Request ``runs`` CPU-bound runs at once; return the wall time until all finished."""
    with site(BENCH_CPU_JOBS=str(runs), BENCH_CPU_LOOPS=str(loops), BENCH_RUN_ON=run_on) as (
        cluster,
        url,
        env,
    ):
        label = f"cpu-{run_on}-{processes}"
        nodes = [Replica(f"{label}-scheduler", env, "plugins", extra_args=("--workers", "0"))]
        if processes:
            nodes.append(
                Replica(
                    f"{label}-workers",
                    env,
                    command="runworker",
                    extra_args=("--processes", str(processes)),
                )
            )
        conn = psycopg.connect(url, autocommit=True, application_name="bench")
        requester = Requester(env)
        try:
            wait_until_ready(conn, states=runs, pattern="benchjobs.cpu_%", listening=processes)
            load = os.getloadavg()[0]
            cpu_before = cpu_snapshot(cluster, nodes)
            asked = db_now(conn)
            requester.request([f"benchjobs.cpu_{n:02d}" for n in range(runs)])
            done = (
                "SELECT count(*) FROM coordination_jobrun WHERE job LIKE 'benchjobs.cpu_%%'"
                " AND status = ANY(%s)"
            )
            wait_for(
                lambda: conn.execute(done, (list(FINISHED),)).fetchone()[0] >= runs,
                runs * 4 + 60,
                0.1,
            )
            cpu = {k: v - cpu_before[k] for k, v in cpu_snapshot(cluster, nodes).items()}
            rows = conn.execute(
                "SELECT node, status, extract(epoch FROM started_at - %s),"
                " extract(epoch FROM finished_at - %s),"
                " extract(epoch FROM finished_at - started_at)"
                " FROM coordination_jobrun WHERE job LIKE 'benchjobs.cpu_%%'",
                (asked, asked),
            ).fetchall()
        finally:
            requester.close()
            conn.close()
            for node in nodes:
                node.stop()
    wall = max(float(r[3]) for r in rows)
    durations = [float(r[4]) for r in rows]
    return {
        "run_on": run_on,
        "processes": processes,
        "wall": wall,
        "throughput": len(rows) / wall,
        "statuses": Counter(r[1] for r in rows),
        "first_start": min(float(r[2]) for r in rows),
        "durations": durations,
        "nodes": Counter(r[0] for r in rows),
        "load": load,
        "cpu": cpu,
    }


def report_cpu(results: list[dict], baseline: dict, calibrated: float) -> list[tuple]:
    rows = []
    base = baseline["throughput"]
    for r in results:
        n = r["processes"]
        ratio = r["throughput"] / base
        target = n == 2
        rows.append(
            (
                f"{n} worker process(es): throughput",
                f"{r['throughput']:.2f}/s",
                f">= {TARGET_SPEEDUP}x" if target else "measured",
                ratio >= TARGET_SPEEDUP if target else True,
            )
        )
        rows.append((f"{n} worker process(es): vs the leader", f"{ratio:.2f}x", "", True))
        _report.figure(
            f"CPU-bound runs/s with {n} worker process(es)",
            r["throughput"],
            unit="runs/s",
            baseline=base,
            baseline_name="run_on=leader (threads)",
            target=f">= {TARGET_SPEEDUP}x" if target else "",
            ok=(ratio >= TARGET_SPEEDUP) if target else None,
        )
    rows.append(("run_on=leader: throughput (baseline)", f"{base:.2f}/s", "baseline", True))
    _report.series(
        "CPU-bound throughput against worker processes",
        [(r["processes"], r["throughput"]) for r in results],
        x_label="worker processes",
        y_label="runs / s",
        label="run_on=workers (runworker --processes N)",
    )
    _report.series(
        "CPU-bound throughput against worker processes",
        [(r["processes"], base) for r in results],
        x_label="worker processes",
        y_label="runs / s",
        label="run_on=leader (same run)",
    )
    print(f"\n  where the time goes (one run calibrated to {calibrated:.2f} s here):")
    for r in [*results, baseline]:
        d, cpu = r["durations"], r["cpu"]
        who = f"{r['processes']} workers" if r["run_on"] == "workers" else "leader"
        ours = cpu["schedulers"] + cpu["worker processes"]
        print(
            f"    {who}: wall {r['wall']:.1f} s; first start {r['first_start'] * 1000:.0f} ms"
            f" after the request; a run took {statistics.fmean(d):.2f} s on average (max"
            f" {max(d):.2f}); CPU: Instatic's processes {ours:.1f} s ({ours / r['wall']:.2f}"
            f" cores), the machine busy {cpu['machine busy'] / cpu['machine'] * 100:.0f}% of"
            f" {os.cpu_count()} cores; load average before {r['load']:.1f};"
            f" statuses {dict(r['statuses'])}"
        )
    return rows


# --- 3. the queue's wait on an idle cluster ------------------------------------------------


def queue_wait(samples: int) -> dict:
    """Run ``ping`` on request ``samples`` times on one idle worker; return its waits."""
    with site(BENCH_RUN_ON="workers", BENCH_PING="1") as (cluster, url, env):
        node = Replica("queue-1", env, "plugins", extra_args=("--workers", "1"))
        conn = psycopg.connect(url, autocommit=True, application_name="bench")
        requester = Requester(env)
        try:
            wait_until_ready(conn, states=1, pattern="benchjobs.ping", listening=1)
            done = (
                "SELECT count(*) FROM coordination_jobrun WHERE job = 'benchjobs.ping'"
                " AND status = ANY(%s)"
            )
            busy_before = _cpu_usage.machine_busy()
            for i in range(samples):
                requester.request(["benchjobs.ping"])
                wait_for(
                    lambda i=i: conn.execute(done, (list(FINISHED),)).fetchone()[0] > i, 30, 0.002
                )
                time.sleep(0.02)  # the worker is back waiting before the next request
            busy, total = (
                b - a for a, b in zip(busy_before, _cpu_usage.machine_busy(), strict=True)
            )
            rows = conn.execute(
                "SELECT extract(epoch FROM started_at - queued_at),"
                " extract(epoch FROM queued_at - slot) FROM coordination_jobrun"
                " WHERE job = 'benchjobs.ping'"
            ).fetchall()
            round_trips = []
            for _ in range(samples):
                started = time.perf_counter()
                conn.execute("SELECT 1").fetchone()
                round_trips.append((time.perf_counter() - started) * 1000)
        finally:
            requester.close()
            conn.close()
            node.stop()
    return {
        "wait_ms": [float(r[0]) * 1000 for r in rows],
        "reaction_ms": [float(r[1]) * 1000 for r in rows],
        "select1_ms": round_trips,
        "machine_busy": busy / total if total else float("nan"),
    }


def report_queue(r: dict) -> list[tuple]:
    p50, p99 = (percentile(r["wait_ms"], q) for q in (50, 99))
    b50, b99 = (percentile(r["select1_ms"], q) for q in (50, 99))
    n = len(r["wait_ms"])
    _report.samples(f"claim-to-start on an idle worker (n={n})", r["wait_ms"], unit="ms")
    _report.figure(
        "claim-to-start p99 on an idle worker (started_at - queued_at)",
        p99,
        unit="ms",
        baseline=b99,
        baseline_name="SELECT 1 round trip p99",
        target=f"<= {TARGET_QUEUE_WAIT_MS:.0f} ms",
        ok=p99 <= TARGET_QUEUE_WAIT_MS,
    )
    _report.figure(
        "claim-to-start p50 on an idle worker",
        p50,
        unit="ms",
        baseline=b50,
        baseline_name="SELECT 1 round trip p50",
    )
    print(
        f"\n  request -> queued (the leader's wake-up and queueing): p50"
        f" {percentile(r['reaction_ms'], 50):.1f} ms, p99 {percentile(r['reaction_ms'], 99):.1f}"
        f" ms; claim-to-start max {max(r['wait_ms']):.1f} ms; the machine was busy"
        f" {r['machine_busy'] * 100:.0f}% of {os.cpu_count()} cores meanwhile (an idle worker"
        " wakes on NOTIFY, then takes the task in a transaction and moves the run: its"
        " wait is CPU scheduling and round trips, so a busy machine shows in the p99)"
    )
    return [
        (f"claim-to-start p50 ({n} runs)", f"{p50:.1f} ms", "measured", True),
        (
            f"claim-to-start p99 ({n} runs)",
            f"{p99:.1f} ms",
            f"<= {TARGET_QUEUE_WAIT_MS:.0f} ms",
            p99 <= TARGET_QUEUE_WAIT_MS,
        ),
        ("SELECT 1 round trip p50", f"{b50:.2f} ms", "baseline", True),
        ("SELECT 1 round trip p99", f"{b99:.2f} ms", "baseline", True),
    ]


# --- 4. idle statements -------------------------------------------------------------------


def idle(count: int, workers: int, seconds: float) -> dict:
    """Return each replica's statements per minute (and the workers' by kind) while idle."""
    with migrated_site(STATEMENT_LOG, INSTATIC_LEASE=str(LEASE)) as (cluster, url, env):
        replicas = [
            Replica(
                f"idle-w{workers}-{count}-{i}",
                env,
                extra_args=(f"--workers={workers}",),
                name_sessions=True,
            )
            for i in range(1, count + 1)
        ]
        conn = psycopg.connect(url, autocommit=True, application_name="bench")
        try:
            listeners = (
                "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE '%%/listen'"
            )
            wait_for(lambda: conn.execute(listeners).fetchone()[0] >= count * workers, 120, 0.1)
            matches = statements_while_idle(cluster, conn, seconds, lease=LEASE, timeout=120)
        finally:
            conn.close()
            for replica in replicas:
                replica.stop()
    counts = statements_by_node(matches)
    kinds = Counter(
        f"{m.group(1).split('/', 1)[1]}: {m.group(2)}"
        for m in matches
        if "/" in m.group(1) and m.group(1).split("/")[0] in {r.name for r in replicas}
    )
    return {
        "per": {r.name: counts.get(r.name, 0) * 60 / seconds for r in replicas},
        "worker_kinds": kinds,
        "seconds": seconds,
    }


def idle_all(seconds: float) -> dict[tuple[int, int], dict]:
    """Measure the four idle clusters side by side (threads that mostly wait)."""
    configs = [(count, workers) for workers in (0, WORKERS_PER_REPLICA) for count in (1, REPLICAS)]
    results: dict[tuple[int, int], dict] = {}
    errors: list[BaseException] = []

    def one(config):
        try:
            results[config] = idle(*config, seconds)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(c,)) for c in configs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def report_idle(results: dict[tuple[int, int], dict]) -> list[tuple]:
    rows = []
    busiest = {config: max(r["per"].values()) for config, r in results.items()}
    for count, workers in sorted(busiest, key=lambda config: (config[1], config[0])):
        b = busiest[(count, workers)]
        rows.append(
            (
                f"{count} replica(s) --workers {workers}: busiest replica / min",
                f"{b:.0f}",
                f"<= {TARGET_IDLE:.0f}",
                b <= TARGET_IDLE,
            )
        )
    for workers in (0, WORKERS_PER_REPLICA):
        growth = busiest[(REPLICAS, workers)] / max(1e-9, busiest[(1, workers)])
        rows.append(
            (
                f"--workers {workers}: busiest at {REPLICAS} vs at 1 replica",
                f"{growth:.2f}x",
                f"<= {TARGET_GROWTH}x",
                growth <= TARGET_GROWTH,
            )
        )
    for count in (1, REPLICAS):
        value, base = busiest[(count, WORKERS_PER_REPLICA)], busiest[(count, 0)]
        _report.figure(
            f"idle statements / replica / min, {count} replica(s) --workers"
            f" {WORKERS_PER_REPLICA} (busiest)",
            value,
            unit="statements",
            baseline=base,
            baseline_name="--workers 0",
            target=f"<= {TARGET_IDLE:.0f}",
            ok=value <= TARGET_IDLE,
        )
    for workers in (0, WORKERS_PER_REPLICA):
        _report.series(
            "idle statements per replica per minute against replicas",
            [(count, busiest[(count, workers)]) for count in (1, REPLICAS)],
            x_label="replicas",
            y_label="statements / replica / min (busiest)",
            label=f"--workers {workers}",
        )
    print("\n  per replica (statements / min):")
    for (count, workers), r in sorted(results.items()):
        print(
            f"    {count} replica(s) --workers {workers}: "
            + ", ".join(f"{name}={v:.0f}" for name, v in r["per"].items())
        )
    for workers in (0, WORKERS_PER_REPLICA):
        r = results[(REPLICAS, workers)]
        print(
            f"  {REPLICAS} replicas --workers {workers}, statements by session and kind (all"
            f" replicas, {r['seconds']:.0f} s; 'unnamed': sessions without an application_name):"
        )
        for kind, n in r["worker_kinds"].most_common(12):
            print(f"      {n:5d}  {kind}")
    return rows


def main() -> None:
    started = time.monotonic()
    rows: list[tuple] = []
    if "queue" in PARTS:
        rows += report_queue(queue_wait(scaled(200, 20)))
    if "burst" in PARTS:
        jobs = scaled(1000, 10)
        on_workers = burst("workers", jobs)
        on_leader = burst("leader", jobs)
        rows += report_bursts(on_workers, on_leader)
        explain_burst(on_workers)
        explain_burst(on_leader)
    if "cpu" in PARTS:
        runs = scaled(60, 4)
        loops = calibrate(1.0)
        print(f"\n  calibrated: {loops:,} loops of bench._cpu.burn take ~1 s here")
        results = [cpu_wall("workers", n, runs, loops) for n in (1, 2, 4)]
        baseline = cpu_wall("leader", 0, runs, loops)
        rows += report_cpu(results, baseline, 1.0)
    if "idle" in PARTS:
        rows += report_idle(idle_all(max(20.0, 60.0 * SCALE)))
    print_table(
        f"bench/workers.py: runs on worker processes (scale {SCALE:g},"
        f" {time.monotonic() - started:.0f} s)",
        rows,
    )
    if not all(ok for *_, ok in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
