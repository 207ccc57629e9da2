"""Releases benchmark: a release of 10,000 items goes out in one transaction, on time.

Three ``runscheduler`` replicas (publishing group) on a throwaway PostgreSQL. Each of
``BENCH_RELEASE_ROUNDS`` (10) rounds makes a release of ``BENCH_RELEASE_ITEMS`` (10,000)
fresh draft posts (rows written with COPY, items pinned to version 1, as the admin pins
them), schedules it a few seconds ahead and wakes the publish job as scheduling does. Figures:

1. **Start lateness**, ``released_at - release_at`` (both by the database clock:
   ``released_at`` is the time the release's transaction read): p99 over the rounds. Target:
   <= 50 ms, the single posts' on-time target (bench/publishing.py).
2. **The transaction's duration**, the publish job's run that sent the release out (its
   ``coordination_jobrun.duration``: lock, check and change the 10,000 posts, write their
   events, mark the release), beside its baseline: one plain ``UPDATE publishing_post SET
   status = 'published'`` of the same rows, rolled back, timed just before. Target: <= 3x,
   as the backlog's publish (bench/publishing.py).
3. **Visible by**, the run's ``finished_at - release_at``: when every post of it was public.

Checked: each release ``released`` once, every post published with exactly one event
carrying the release, none before the release's time.

``BENCH_RELEASE_ITEMS=2000 BENCH_RELEASE_ROUNDS=3 python -m bench.releases`` for a quick try.
"""

import os
import time

import psycopg

from bench import _report
from bench._harness import Replica, migrated_site, percentile, print_table, wait_for
from bench.publishing import wake

TARGET_P99_MS = 50.0
TARGET_RATIO = 3.0
REPLICAS = 3
#: How far ahead each release is scheduled (seconds): the job is asleep until it is due.
AHEAD = 3.0


def insert_drafts(conn, prefix: str, count: int) -> None:
    """Insert ``count`` draft posts (COPY), as an editor's drafts."""
    now = conn.execute("SELECT now()").fetchone()[0]
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY publishing_post (title, slug, body, body_html, excerpt, status, last_error,"
            " created_at, updated_at, updated_by, version, preview_generation) FROM STDIN"
        ) as copy,
    ):
        for i in range(count):
            copy.write_row(
                (f"{prefix} {i}", f"{prefix}-{i}", "Body.", "<p>Body.</p>", "Body.", "draft", "")
                + (now, now, "bench", 1, 0)
            )


def make_release(conn, prefix: str) -> int:
    """Make a draft release of every post of ``prefix``, items pinned to version 1."""
    pk = conn.execute(
        "INSERT INTO publishing_release (name, status, problem, created_at, updated_at,"
        " updated_by, version) VALUES (%s, 'draft', '', now(), now(), 'bench', 1) RETURNING id",
        (prefix,),
    ).fetchone()[0]
    conn.execute(
        "INSERT INTO publishing_releaseitem (release_id, post_id, post_title, action,"
        " pinned_version, added_at) SELECT %s, id, title, 'publish', 1, now()"
        " FROM publishing_post WHERE slug LIKE %s",
        (pk, f"{prefix}-%"),
    )
    conn.execute("VACUUM ANALYZE publishing_post")
    conn.execute("VACUUM ANALYZE publishing_releaseitem")
    return pk


def plain_update_seconds(conn, prefix: str) -> float:
    """Time one plain UPDATE of the release's posts to published, rolled back."""
    with conn.transaction(force_rollback=True):
        started = time.perf_counter()
        conn.execute(
            "UPDATE publishing_post SET status = 'published', published_at = now()"
            " WHERE id IN (SELECT post_id FROM publishing_releaseitem WHERE release_id ="
            " (SELECT id FROM publishing_release WHERE name = %s))",
            (prefix,),
        )
        seconds = time.perf_counter() - started
    conn.execute("VACUUM ANALYZE publishing_post")
    return seconds


def schedule(conn, pk: int) -> None:
    """Schedule the release ``AHEAD`` seconds from now and wake the publish job for it."""
    with conn.transaction():
        at = conn.execute(
            "UPDATE publishing_release SET status = 'scheduled',"
            " release_at = now() + make_interval(secs => %s) WHERE id = %s RETURNING release_at",
            (AHEAD, pk),
        ).fetchone()[0]
        wake(conn, at)


def released(conn, pk: int) -> bool:
    return conn.execute(
        "SELECT status = 'released' FROM publishing_release WHERE id = %s", (pk,)
    ).fetchone()[0]


def figures_of(conn, pk: int) -> dict:
    """Return the release's start lateness, its run's duration and when it was all visible."""
    released_at, release_at = conn.execute(
        "SELECT released_at, release_at FROM publishing_release WHERE id = %s", (pk,)
    ).fetchone()
    duration, finished = conn.execute(
        "SELECT duration, finished_at FROM coordination_jobrun WHERE job ="
        " 'publishing.publish_due' AND status = 'succeeded' AND started_at <= %s"
        " AND finished_at >= %s ORDER BY started_at DESC LIMIT 1",
        (released_at, released_at),
    ).fetchone()
    events, posts, early = conn.execute(
        "SELECT count(*), count(DISTINCT post_id), count(*) FILTER (WHERE at < %s)"
        " FROM publishing_publishevent WHERE kind = 'published' AND (data->>'release')::int = %s",
        (release_at, pk),
    ).fetchone()
    return {
        "start": (released_at - release_at).total_seconds(),
        "duration": duration,
        "visible": (finished - release_at).total_seconds(),
        "events": events,
        "posts": posts,
        "early": early,
    }


def main() -> None:
    items = int(os.environ.get("BENCH_RELEASE_ITEMS", "10000"))
    rounds = int(os.environ.get("BENCH_RELEASE_ROUNDS", "10"))
    results, baselines = [], []
    with migrated_site() as (_cluster, url, env):
        replicas = [Replica(f"rel-bench-{i}", env, "publishing") for i in range(1, REPLICAS + 1)]
        conn = psycopg.connect(url, autocommit=True, application_name="bench")
        try:
            wait_for(
                lambda: conn.execute(
                    "SELECT 1 FROM coordination_leadership WHERE \"group\"='publishing'"
                ).fetchone(),
                60,
            )
            for n in range(rounds):
                prefix = f"release-{n}"
                insert_drafts(conn, prefix, items)
                pk = make_release(conn, prefix)
                baselines.append(plain_update_seconds(conn, prefix))
                schedule(conn, pk)
                wait_for(lambda pk=pk: released(conn, pk), 300, interval=0.05)
                results.append(figures_of(conn, pk))
                print(
                    f"round {n + 1}/{rounds}: start +{results[-1]['start'] * 1000:.1f} ms,"
                    f" transaction {results[-1]['duration']:.2f} s, plain UPDATE"
                    f" {baselines[-1]:.2f} s",
                    flush=True,
                )
        finally:
            conn.close()
            for replica in replicas:
                replica.stop()

    starts = [r["start"] * 1000 for r in results]
    durations = [r["duration"] for r in results]
    visible = [r["visible"] * 1000 for r in results]
    p99 = percentile(starts, 99)
    median_duration = sorted(durations)[len(durations) // 2]
    median_baseline = sorted(baselines)[len(baselines) // 2]
    ratio = median_duration / median_baseline
    once = all(r["events"] == r["posts"] == items and r["early"] == 0 for r in results)
    _report.samples("release start lateness (ms)", starts, unit="ms")
    _report.figure(
        f"release of {items:,} items: transaction (median)",
        median_duration,
        unit="s",
        baseline=median_baseline,
        baseline_name=f"plain UPDATE of the {items:,} rows",
        target=f"<= {TARGET_RATIO:.0f}x",
        ok=ratio <= TARGET_RATIO,
    )
    table = [
        (
            f"plain UPDATE of {items:,} posts (baseline, median)",
            f"{median_baseline:.2f} s",
            "-",
            True,
        ),
        (
            f"release of {items:,} items: its transaction (median)",
            f"{median_duration:.2f} s",
            "-",
            True,
        ),
        (
            "  ratio to the plain UPDATE",
            f"{ratio:.1f}x",
            f"<= {TARGET_RATIO:.0f}x",
            ratio <= TARGET_RATIO,
        ),
        (f"start lateness p50 ({rounds} releases)", f"{percentile(starts, 50):.1f} ms", "-", True),
        ("start lateness p99", f"{p99:.1f} ms", f"<= {TARGET_P99_MS:.0f} ms", p99 <= TARGET_P99_MS),
        (
            "all of it public by (p99, release time to commit)",
            f"{percentile(visible, 99):.0f} ms",
            "-",
            True,
        ),
        (
            "each post published once, with the release, never early",
            "yes" if once else "NO",
            "yes",
            once,
        ),
    ]
    print_table("bench/releases.py: three replicas on a throwaway PostgreSQL", table)
    if not all(ok for *_, ok in table):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
