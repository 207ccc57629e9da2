"""Plugin jobs at scale: ``BENCH_JOBS`` (1,000) jobs every minute on three real replicas.

Issue 16, row 3. The jobs come from a bench-only plugin app (``bench/_jobsapp``, added by the
settings module ``bench._settings``); all of them are due at the same instant, the top of
every minute, which is what ``* * * * *`` gives a thousand plugins. Each run appends one line
to a file of its process and touches no table, so:

- **start lateness** is the job's own ``time.time() - slot`` as it starts (same host as the
  database, so one clock), over ``BENCH_MINUTES`` (3) whole minutes: target p99 <= 200 ms;
- **statements per run** are every statement the replicas sent in those minutes (heartbeats,
  ticks, lock checks, claims, outcomes), counted from the server's statement log by
  ``application_name`` as in ``bench/scheduler.py``, divided by the runs: target <= 4;
- **duplicates** are (job, slot) lines written twice, whatever the ledger says: target 0;
  slots that never ran are reported too.

``BENCH_TRANSACTIONAL=1`` declares the jobs transactional instead (measured, not targeted).
No same-run baseline: the issue names none for this row.
"""

import os
import shutil
import statistics
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


def main() -> None:
    jobs = int(os.environ.get("BENCH_JOBS", "1000"))
    minutes = int(os.environ.get("BENCH_MINUTES", "3"))
    transactional = os.environ.get("BENCH_TRANSACTIONAL", "") == "1"
    effects = Path("/tmp/instatic-bench-effects")
    shutil.rmtree(effects, ignore_errors=True)
    effects.mkdir(parents=True)
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
            # One whole minute first: the jobs' first slot, and start-up work, are not measured.
            first = next_minute(db_now(conn) + timedelta(seconds=70))
            pause_until(conn, first - MARGIN)
            log_path = cluster.workdir / "server.log"
            offset = log_path.stat().st_size
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
            for replica in replicas.values():
                replica.stop()

    lines = read_effects(effects)
    window = [line for line in lines if first <= line[1] <= last]
    runs = len(window)
    expected = jobs * minutes
    seen = Counter((job, slot) for job, slot, _, _ in lines)
    duplicates = sum(n - 1 for n in seen.values() if n > 1)
    missing = expected - len({(job, slot) for job, slot, _, _ in window})
    lateness_ms = [lateness * 1000 for *_, lateness in window]
    p50 = percentile(lateness_ms, 50)
    p99 = percentile(lateness_ms, 99)
    matches = list(STATEMENT.finditer(text))
    by_node = Counter(m.group(1).split("/")[0] for m in matches if m.group(1) in _apps(names))
    statements = sum(by_node.values())
    per_run = statements / runs if runs else float("inf")
    leader_kinds = Counter(m.group(2) for m in matches if m.group(1).startswith(f"{lead}/"))

    kind = "transactional" if transactional else "claim-first"
    rows = [
        (f"start lateness p50 ({kind})", f"{p50:.0f} ms", "measured", True),
        (f"start lateness p99 ({kind})", f"{p99:.0f} ms", f"<= {TARGET_P99_MS:.0f} ms", p99 <= 200),
        ("statements per run (all replicas)", f"{per_run:.2f}", "<= 4", per_run <= 4),
        ("duplicate runs", str(duplicates), "0", duplicates == 0 and ledger_dupes == 0),
        ("slots not run", str(missing), "0", missing == 0),
    ]
    title = (
        f"bench/jobs_per_minute.py: {jobs} jobs every minute, {REPLICAS} replicas, {minutes} min"
    )
    print_table(title, rows)
    print(
        f"  {runs} runs; statements by replica: "
        + ", ".join(f"{n}={by_node.get(n, 0)}" for n in names)
        + f"; lateness max {max(lateness_ms, default=0):.0f} ms,"
        f" mean {statistics.fmean(lateness_ms) if lateness_ms else 0:.0f} ms"
    )
    if os.environ.get("BENCH_SHOW_STATEMENTS"):
        print(f"  statements of the leader ({lead}):")
        for sql, n in leader_kinds.most_common(20):
            print(f"    {n:6d}  {sql}")
    suffix = "_tx" if transactional else ""
    _report.samples(
        f"jobs_per_minute{suffix}", f"start lateness, {jobs} jobs ({kind})", lateness_ms, unit="ms"
    )
    _report.figure(
        f"statements per run ({kind})",
        per_run,
        unit="statements",
        target=f"<= {TARGET_STATEMENTS:.0f}",
        ok=per_run <= TARGET_STATEMENTS,
        bench=f"jobs_per_minute{suffix}",
    )
    if not all(ok for *_, ok in rows):
        raise SystemExit(1)


def _apps(names: list[str]) -> set[str]:
    return {f"{name}/{role}" for name in names for role in ("lock", "work")}


if __name__ == "__main__":
    main()
