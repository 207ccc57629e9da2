"""Publishing benchmark: three replicas on a throwaway PostgreSQL, each figure beside its baseline.

Two figures in one run:

1. **Backlog.** ``BENCH_BACKLOG`` (100,000) scheduled posts, due a minute ago (as after the
   schedulers' downtime), are found at once by the replicas, which
   publish them (events and the lateness metric included). Baseline, measured on the same
   rows just before: one plain ``UPDATE publishing_post SET status = 'published'`` of all of
   them (rolled back, then the table is vacuumed). Target: <= 3x the baseline.
2. **On time while the backlog drains.** ``BENCH_ON_TIME`` (1,000) posts scheduled at random
   instants over ``BENCH_SPREAD_SECONDS`` (60 s) from the moment the backlog falls due.
   Lateness is ``published_at - publish_at`` (both by the database clock). Baseline: two
   ``SELECT 1`` round trips from this process (median of 200). Target: p99 <= 50 ms; the posts
   that fell due while the backlog was still draining are reported on their own.

Also checked: no post published early, one ``published`` event per post (never twice).
"""

import os
import random
import statistics
import time
from datetime import timedelta

import psycopg

from bench._harness import Replica, migrated_site, percentile, print_table, wait_for

TARGET_BACKLOG_RATIO = 3.0
TARGET_P99_MS = 50.0
#: How long ago the backlog fell due (seconds): late already, as after a scheduler's downtime.
BACKLOG_AGE = 60

WAKE_SQL = """
UPDATE coordination_jobstate SET wake_at = LEAST(COALESCE(wake_at, %(at)s), %(at)s)
WHERE name = 'publishing.publish_due'
"""


def insert_posts(conn, prefix: str, due: list) -> None:
    """Insert scheduled posts due at the given instants (COPY)."""
    now = conn.execute("SELECT now()").fetchone()[0]
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY publishing_post (title, slug, body, status, publish_at, last_error, created_at,"
            " updated_at, updated_by, version) FROM STDIN"
        ) as copy,
    ):
        for i, at in enumerate(due):
            copy.write_row(
                (f"{prefix} {i}", f"{prefix}-{i}", "Body.", "scheduled", at, "", now, now, "", 1)
            )


def wake(conn, at) -> None:
    """What an editor action does when it schedules: lower the wake-up, NOTIFY."""
    conn.execute(WAKE_SQL, {"at": at})
    conn.execute("SELECT pg_notify('instatic_wakeup_publishing', '')")


def any_scheduled(conn, due_by) -> bool:
    """Return True while a scheduled post due by ``due_by`` is left (one index probe)."""
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM publishing_post WHERE status = 'scheduled'"
        " AND publish_at <= %s)",
        (due_by,),
    ).fetchone()[0]


def plain_update_seconds(conn) -> float:
    """Time one plain UPDATE of the backlog's rows to published, then undo it and vacuum."""
    conn.execute("VACUUM ANALYZE publishing_post")
    with conn.transaction(force_rollback=True):
        started = time.perf_counter()
        conn.execute(
            "UPDATE publishing_post SET status = 'published', published_at = now()"
            " WHERE slug LIKE 'backlog-%%'"
        )
        seconds = time.perf_counter() - started
    conn.execute("VACUUM ANALYZE publishing_post")
    return seconds


def select_round_trips_ms(conn, runs: int = 200) -> float:
    """Return the median time of two ``SELECT 1`` round trips, in ms."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        conn.execute("SELECT 1").fetchone()
        conn.execute("SELECT 1").fetchone()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    spread = float(os.environ.get("BENCH_SPREAD_SECONDS", "60"))
    backlog = int(os.environ.get("BENCH_BACKLOG", "100000"))
    on_time = int(os.environ.get("BENCH_ON_TIME", "1000"))
    rng = random.Random(42)
    with migrated_site() as (_cluster, url, env):
        replicas = [Replica(f"pub-bench-{i}", env, "publishing") for i in range(1, 4)]
        conn = psycopg.connect(url, autocommit=True)
        try:
            wait_for(
                lambda: conn.execute(
                    "SELECT 1 FROM coordination_leadership WHERE \"group\"='publishing'"
                ).fetchone(),
                60,
            )
            far = conn.execute("SELECT now() + interval '1 day'").fetchone()[0]
            insert_posts(conn, "backlog", [far] * backlog)
            baseline = plain_update_seconds(conn)
            round_trips = select_round_trips_ms(conn)

            # The backlog falls due, a minute ago as after downtime (and the scheduler is
            # woken), then the on-time posts are scheduled from the moment that is committed.
            with conn.transaction():
                now = conn.execute("SELECT now()").fetchone()[0]
                backlog_due = now - timedelta(seconds=BACKLOG_AGE)
                conn.execute(
                    "UPDATE publishing_post SET publish_at = %s WHERE slug LIKE 'backlog-%%'",
                    (backlog_due,),
                )
                wake(conn, backlog_due)
            started = time.monotonic()
            with conn.transaction():
                now = conn.execute("SELECT statement_timestamp()").fetchone()[0]
                offsets = sorted(0.5 + rng.random() * spread for _ in range(on_time))
                insert_posts(conn, "on-time", [now + timedelta(seconds=s) for s in offsets])
                wake(conn, now + timedelta(seconds=offsets[0]))
            wait_for(lambda: not any_scheduled(conn, backlog_due), 600, interval=0.02)
            backlog_seconds = time.monotonic() - started
            drained_at = conn.execute("SELECT max(published_at) FROM publishing_post").fetchone()[0]
            wait_for(lambda: not any_scheduled(conn, far), spread + 60, interval=0.5)
            rows = conn.execute(
                "SELECT extract(epoch FROM published_at - publish_at)::float8, publish_at"
                " FROM publishing_post WHERE slug LIKE 'on-time-%'"
            ).fetchall()
            events = conn.execute(
                "SELECT count(*), count(DISTINCT post_id) FROM publishing_publishevent"
                " WHERE kind = 'published'"
            ).fetchone()
        finally:
            conn.close()
            for replica in replicas:
                replica.stop()
    lateness = [value for value, _ in rows]
    during = [value for value, due in rows if due <= drained_at]
    early = sum(1 for value in lateness if value < 0)
    p50, p99, worst = (percentile(lateness, q) * 1000 for q in (50, 99, 100))
    during_worst = max(during, default=0) * 1000
    ratio = backlog_seconds / baseline
    table = [
        (
            f"plain UPDATE of the {backlog:,} rows (baseline)",
            f"{baseline:.2f} s",
            "-",
            True,
        ),
        (
            f"publish {backlog:,} due posts, 3 replicas",
            f"{backlog_seconds:.2f} s",
            "-",
            True,
        ),
        (
            "  ratio to the plain UPDATE",
            f"{ratio:.1f}x",
            f"<= {TARGET_BACKLOG_RATIO:.0f}x",
            ratio <= TARGET_BACKLOG_RATIO,
        ),
        ("two SELECT 1 round trips (baseline)", f"{round_trips:.2f} ms", "-", True),
        (
            f"on-time lateness p50 ({len(lateness)} posts over {spread:.0f} s)",
            f"{p50:.0f} ms",
            "-",
            True,
        ),
        (
            "on-time lateness p99",
            f"{p99:.0f} ms",
            f"<= {TARGET_P99_MS:.0f} ms",
            p99 <= TARGET_P99_MS,
        ),
        ("  p99 / two round trips", f"{p99 / round_trips:.0f}x", "-", True),
        ("on-time lateness max", f"{worst:.0f} ms", "-", True),
        (
            f"  worst of the {len(during)} due while the backlog drained",
            f"{during_worst:.0f} ms",
            "-",
            True,
        ),
        ("posts published early", str(early), "0", early == 0),
        (
            "published events / distinct posts",
            f"{events[0]}/{events[1]}",
            f"{backlog + on_time}",
            events[0] == events[1] == backlog + on_time,
        ),
    ]
    print_table("bench/publishing.py: three replicas on a throwaway PostgreSQL", table)
    if not all(ok for *_, ok in table):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
