"""Publishing benchmark: three replicas on a throwaway PostgreSQL.

Prints lateness (``published_at - publish_at``, both by the database clock) p50/p99/max for
500 posts scheduled at random instants over 60 s (target p99 <= 250 ms), and the time to
publish 100,000 posts that are all due at once (target <= 15 s). ``BENCH_SPREAD_SECONDS`` and
``BENCH_BACKLOG`` scale the two runs down for a quick look.
"""

import os
import random
import time
from datetime import timedelta

import psycopg

from bench._harness import Replica, migrated_site, percentile, print_table, wait_for

WAKE_SQL = """
UPDATE coordination_jobstate SET wake_at = LEAST(COALESCE(wake_at, %(at)s), %(at)s)
WHERE name = 'publishing.publish_due'
"""


def insert_posts(conn, prefix: str, offsets: list[float]) -> None:
    """Insert scheduled posts due at now() + offset seconds (the database's now), then wake."""
    now = conn.execute("SELECT now()").fetchone()[0]
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY publishing_post (title, slug, body, status, publish_at, last_error, created_at,"
            " updated_at) FROM STDIN"
        ) as copy,
    ):
        for i, offset in enumerate(offsets):
            copy.write_row(
                (
                    f"{prefix} {i}",
                    f"{prefix}-{i}",
                    "Body.",
                    "scheduled",
                    now + timedelta(seconds=offset),
                    "",
                    now,
                    now,
                )
            )
    # What publishing.services does when an editor schedules: lower the wake-up, NOTIFY.
    with conn.transaction():
        conn.execute(WAKE_SQL, {"at": now + timedelta(seconds=min(offsets))})
        conn.execute("SELECT pg_notify('instatic_wakeup_publishing', '')")


def scheduled(conn) -> int:
    return conn.execute("SELECT count(*) FROM publishing_post WHERE status='scheduled'").fetchone()[
        0
    ]


def main() -> None:
    spread = float(os.environ.get("BENCH_SPREAD_SECONDS", "60"))
    backlog = int(os.environ.get("BENCH_BACKLOG", "100000"))
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
            insert_posts(conn, "spread", [2 + rng.random() * spread for _ in range(500)])
            wait_for(lambda: scheduled(conn) == 0, spread + 60, interval=0.5)
            lateness = [
                row[0]
                for row in conn.execute(
                    "SELECT extract(epoch FROM published_at - publish_at) FROM publishing_post"
                    " WHERE slug LIKE 'spread-%'"
                )
            ]
            early = sum(1 for value in lateness if value < 0)

            insert_posts(conn, "backlog", [-1.0] * backlog)
            started = time.monotonic()
            wait_for(lambda: scheduled(conn) == 0, 600, interval=0.1)
            backlog_seconds = time.monotonic() - started
            events = conn.execute(
                "SELECT count(*), count(DISTINCT post_id) FROM publishing_publishevent"
                " WHERE kind = 'published'"
            ).fetchone()
        finally:
            conn.close()
            for replica in replicas:
                replica.stop()
    p50, p99, worst = (percentile(lateness, q) * 1000 for q in (50, 99, 100))
    rows = [
        (f"lateness p50 ({len(lateness)} posts over {spread:.0f} s)", f"{p50:.0f} ms", "-", True),
        ("lateness p99", f"{p99:.0f} ms", "<= 250 ms", p99 <= 250),
        ("lateness max", f"{worst:.0f} ms", "-", True),
        ("posts published early", str(early), "0", early == 0),
        (
            f"publish {backlog:,} due posts",
            f"{backlog_seconds:.1f} s",
            "<= 15 s",
            backlog_seconds <= 15,
        ),
        (
            "publish events / distinct posts",
            f"{events[0]}/{events[1]}",
            "equal",
            events[0] == events[1],
        ),
    ]
    print_table("bench/publishing.py: three replicas on a throwaway PostgreSQL 15", rows)
    if not all(ok for *_, ok in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
