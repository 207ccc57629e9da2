"""Plugin jobs at scale: 100, 300 and 1,000 jobs every minute on three real replicas.

The jobs come from a bench-only plugin app (``bench/_jobsapp``, added by the
settings module ``bench._settings``); all of them are due at the same instant, the top of
every minute, which is what ``* * * * *`` gives a thousand plugins. For each count in
``BENCH_JOBS`` (``100,300,1000``), on a fresh throwaway PostgreSQL, over ``BENCH_MINUTES`` (2)
whole minutes; each run appends one line to a file of its process and touches no table, so:

- **start lateness** is the job's own ``time.time() - slot`` as it starts (same host as the
  database, so one clock): target p99 <= 200 ms;
- **statements per run** are every statement the replicas sent in those minutes (heartbeats,
  ticks, lock checks, claims, outcomes), counted from the server's statement log by
  ``application_name`` as in ``bench/scheduler.py``, divided by the runs: target <= 4;
- **duplicates** are (job, slot) lines written twice, whatever the ledger says: target 0;
  slots that never ran are reported too.

The report gets the lateness CDF of each count and the cost curves against the number of
jobs due at once. ``BENCH_TRANSACTIONAL=1`` declares the jobs transactional instead
(measured as ``jobs_per_minute_tx``). No same-run baseline: the issue names none for this row.
"""

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import psycopg

from bench import _report
from bench._harness import Replica, leader, migrated_site, percentile, print_table, wait_for
from bench.scheduler import STATEMENT

TARGET_P99_MS = 200.0
TARGET_STATEMENTS = 4.0
REPLICAS = 3
#: How long before a minute's top the counting window opens (and closes, N minutes on).
MARGIN = timedelta(seconds=5)


def read_effects(folder: Path) -> list[tuple[str, datetime, str, float]]:
    """Return every (job, slot, node, lateness seconds) line the replicas' runs wrote."""
    lines = []
    for path in folder.glob("effects-*.txt"):
        for line in path.read_text().splitlines():
            job, slot, node, lateness = line.split(" ")
            lines.append((job, datetime.fromisoformat(slot), node, float(lateness)))
    return lines


def next_minute(now: datetime) -> datetime:
    return now.replace(second=0, microsecond=0) + timedelta(minutes=1)


def pause_until(conn, instant: datetime) -> None:
    """Wait until the database clock reaches ``instant`` (the benchmark's own pacing)."""
    remaining = (instant - db_now(conn)).total_seconds()
    if remaining > 0:
        time.sleep(remaining)


def db_now(conn) -> datetime:
    return conn.execute("SELECT now()").fetchone()[0]


def measure(jobs: int, minutes: int, transactional: bool) -> dict:
    """Run ``jobs`` jobs every minute on three fresh replicas for ``minutes``; return figures."""
    # A folder of this run's own: another bench on the machine must not mix its lines in.
    effects = Path(tempfile.mkdtemp(prefix="instatic-bench-effects-"))
    conf = {"log_statement": "'all'", "log_line_prefix": "'%a|'", "log_min_messages": "info"}
    with migrated_site(
        conf,
        DJANGO_SETTINGS_MODULE="bench._settings",
        BENCH_JOBS=str(jobs),
        BENCH_EFFECTS_DIR=str(effects),
        BENCH_TRANSACTIONAL="1" if transactional else "",
    ) as (cluster, url, env):
        names = [f"jobs-{i}" for i in range(1, REPLICAS + 1)]
        replicas = {name: Replica(name, env, "plugins") for name in names}
        profiler = None
        conn = psycopg.connect(url, autocommit=True, application_name="bench")
        try:
            wait_for(lambda: leader(conn, "plugins"), 60)
            wait_for(
                lambda: (
                    conn.execute(
                        "SELECT count(*) FROM coordination_jobstate WHERE name LIKE 'benchjobs.%%'"
                    ).fetchone()[0]
                    == jobs
                ),
                60,
            )
            # The states exist, so the first measured slot is an ordinary one; start-up work
            # (the maintenance pass one lease on) falls before the window or is counted.
            first = next_minute(db_now(conn) + timedelta(seconds=15))
            pause_until(conn, first - MARGIN)
            log_path = cluster.workdir / "server.log"
            offset = log_path.stat().st_size
            profiler = _profile(replicas.get(leader(conn, "plugins")), jobs)
            last = first + timedelta(minutes=minutes - 1)
            pause_until(conn, last + timedelta(minutes=1) - MARGIN)
            with open(log_path, errors="replace") as f:
                f.seek(offset)
                text = f.read()
            lead = leader(conn, "plugins")
            ledger_dupes = conn.execute(
                "SELECT count(*) FROM (SELECT job, slot FROM coordination_jobrun"
                " GROUP BY job, slot HAVING count(*) > 1) d"
            ).fetchone()[0]
        finally:
            conn.close()
            if profiler is not None:
                profiler.wait()
            for replica in replicas.values():
                replica.stop()

    lines = read_effects(effects)
    shutil.rmtree(effects, ignore_errors=True)
    window = [line for line in lines if first <= line[1] <= last]
    seen = Counter((job, slot) for job, slot, _, _ in lines)
    matches = list(STATEMENT.finditer(text))
    by_node = Counter(m.group(1).split("/")[0] for m in matches if m.group(1) in _apps(names))
    runs = len(window)
    return {
        "jobs": jobs,
        "runs": runs,
        "lateness_ms": [lateness * 1000 for *_, lateness in window],
        "duplicates": sum(n - 1 for n in seen.values() if n > 1) + ledger_dupes,
        "missing": jobs * minutes - len({(job, slot) for job, slot, _, _ in window}),
        "per_run": sum(by_node.values()) / runs if runs else float("inf"),
        "by_node": {n: by_node.get(n, 0) for n in names},
        "leader_kinds": Counter(m.group(2) for m in matches if m.group(1).startswith(f"{lead}/")),
        "leader": lead,
    }


def _profile(replica: Replica | None, jobs: int) -> subprocess.Popen | None:
    """With ``BENCH_PROFILE=<folder>``, sample the leader through the first burst with py-spy.

    py-spy (``BENCH_PYSPY``, else on ``PATH``) attaches to the running process, so the
    replica runs as measured; ``--gil`` keeps only the thread holding the GIL, which is what
    a burst waits for. The collapsed stacks are written as ``pyspy-<jobs>.txt``.
    """
    folder = os.environ.get("BENCH_PROFILE")
    if not folder or replica is None:
        return None
    pyspy = os.environ.get("BENCH_PYSPY") or shutil.which("py-spy") or "py-spy"
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, f"pyspy-{jobs}.txt")
    seconds = str(int(MARGIN.total_seconds()) + 10)
    args = [pyspy, "record", "--pid", str(replica.process.pid), "--duration", seconds]
    args += ["--rate", "250", "--gil", "--format", "raw", "--output", out, "--nonblocking"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    sizes = [int(n) for n in os.environ.get("BENCH_JOBS", "100,300,1000").split(",")]
    minutes = int(os.environ.get("BENCH_MINUTES", "2"))
    transactional = os.environ.get("BENCH_TRANSACTIONAL", "") == "1"
    kind = "transactional" if transactional else "claim-first"
    bench = "jobs_per_minute_tx" if transactional else "jobs_per_minute"
    results = [measure(jobs, minutes, transactional) for jobs in sizes]
    rows = []
    for r in results:
        p99 = percentile(r["lateness_ms"], 99)
        jobs = r["jobs"]
        rows += [
            (
                f"{jobs} jobs: start lateness p50",
                f"{percentile(r['lateness_ms'], 50):.0f} ms",
                "measured",
                True,
            ),
            (
                f"{jobs} jobs: start lateness p99",
                f"{p99:.0f} ms",
                f"<= {TARGET_P99_MS:.0f} ms",
                p99 <= TARGET_P99_MS,
            ),
            (
                f"{jobs} jobs: statements per run",
                f"{r['per_run']:.2f}",
                f"<= {TARGET_STATEMENTS:.0f}",
                r["per_run"] <= TARGET_STATEMENTS,
            ),
            (f"{jobs} jobs: duplicate runs", str(r["duplicates"]), "0", r["duplicates"] == 0),
            (f"{jobs} jobs: slots not run", str(r["missing"]), "0", r["missing"] == 0),
        ]
    print_table(
        f"bench/jobs_per_minute.py: jobs every minute ({kind}), all due at once,"
        f" {REPLICAS} replicas, {minutes} min each",
        rows,
    )
    for r in results:
        late = r["lateness_ms"]
        print(
            f"  {r['jobs']} jobs: {r['runs']} runs; statements by replica: "
            + ", ".join(f"{n}={v}" for n, v in r["by_node"].items())
            + f"; lateness min {min(late, default=0):.0f} ms, max {max(late, default=0):.0f} ms,"
            f" mean {statistics.fmean(late) if late else 0:.0f} ms"
        )
        if os.environ.get("BENCH_SHOW_STATEMENTS"):
            print(f"  statements of the leader ({r['leader']}):")
            for sql, n in r["leader_kinds"].most_common(12):
                print(f"    {n:6d}  {sql}")
        _report.samples(f"{r['jobs']} jobs due at once ({kind})", late, unit="ms", bench=bench)
    largest = results[-1]
    _report.figure(
        f"start lateness p99, {largest['jobs']} jobs due at once ({kind})",
        percentile(largest["lateness_ms"], 99),
        unit="ms",
        target=f"<= {TARGET_P99_MS:.0f} ms",
        ok=percentile(largest["lateness_ms"], 99) <= TARGET_P99_MS,
        bench=bench,
    )
    _report.figure(
        f"statements per run, {largest['jobs']} jobs ({kind})",
        largest["per_run"],
        unit="statements",
        target=f"<= {TARGET_STATEMENTS:.0f}",
        ok=largest["per_run"] <= TARGET_STATEMENTS,
        bench=bench,
    )
    for label, key in (("start lateness p99 (ms)", "lateness"), ("statements per run", "per_run")):
        _report.series(
            f"{label} against jobs due at once",
            [
                (r["jobs"], percentile(r["lateness_ms"], 99) if key == "lateness" else r[key])
                for r in results
            ],
            x_label="jobs due at the same instant",
            y_label=label,
            label=kind,
            bench=bench,
        )
    if not all(ok for *_, ok in rows):
        raise SystemExit(1)


def _apps(names: list[str]) -> set[str]:
    return {f"{name}/{role}" for name in names for role in ("lock", "work")}


if __name__ == "__main__":
    main()
