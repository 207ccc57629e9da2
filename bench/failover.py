"""Failover benchmark: three replicas through PostgreSQL primary failovers, sync and async.

A primary with a hot standby (``devtools.pgreplica``), three ``runscheduler`` replicas on the
multi-host ``DATABASE_URL``, and a post falling due every 0.2 s. Each round stops the primary
with ``-m immediate``, promotes the standby, measures how long until a post is published on
the new primary, then rebuilds the old primary as the new standby.

- synchronous replication: resume time per failover (target <= lease + 5 s), and at the end
  0 posts published twice and 0 posts lost;
- asynchronous replication (no help from the benchmark: the window is whatever the load
  leaves): how many publishes the failovers lost, which is what an operator risks.

A publish that the database forgot is published again by the new leader: the post went live
twice (a second feed entry). The benchmark counts those from what it saw on each primary.

Run: ``python -m bench.failover`` (``BENCH_FAILOVERS``, default 5 per mode).
"""

import os
import subprocess
import sys
import time

import psycopg

from bench._harness import BASE_DIR, Replica, env_for, percentile, print_table, wait_for
from devtools.pgreplica import ReplicatedPair

LEASE = 10.0
POST_EVERY = 0.2


def schedule_posts(env: dict, count: int, *, start: float) -> None:
    """Schedule ``count`` posts, one due every ``POST_EVERY`` s from ``start`` s from now."""
    code = (
        "from datetime import timedelta as d; "
        "from django.db import connection as c; from publishing.models import Post; "
        "cur = c.cursor(); cur.execute('SELECT now()'); now = cur.fetchone()[0]; "
        "Post.objects.bulk_create(Post(title=f'Failover {i}', slug=f'failover-{i}', "
        f"body='body', status='scheduled', publish_at=now + d(seconds={start} + i * {POST_EVERY})) "
        f"for i in range({count}))"
    )
    subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        cwd=BASE_DIR,
        env=env,
        check=True,
    )


def published(url: str) -> dict[int, frozenset[int]]:
    """{post id: ids of its 'published' events} on the current primary."""
    with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
        rows = conn.execute(
            "SELECT post_id, array_agg(id) FROM publishing_publishevent "
            "WHERE kind = 'published' GROUP BY post_id"
        ).fetchall()
    return {post: frozenset(ids) for post, ids in rows}


def try_published(url: str) -> dict[int, frozenset[int]] | None:
    try:
        return published(url)
    except psycopg.Error:
        return None


def standby_lag(pair: ReplicatedPair) -> float:
    """Seconds the standby's flush was behind the primary just before the failover."""
    with psycopg.connect(pair.primary.url(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(extract(epoch FROM flush_lag), 0) FROM pg_stat_replication"
        ).fetchone()
    return float(row[0]) if row else float("nan")


def one_failover(pair: ReplicatedPair, seen: dict[int, set[int]], lags: list[float]) -> float:
    """Fail over once; return seconds from promotion to the first publish on the new primary."""
    before = wait_for(lambda: try_published(pair.url()), 30)
    for post, ids in before.items():
        seen.setdefault(post, set()).update(ids)
    lags.append(standby_lag(pair))
    promoted = pair.fail_over()
    count = len(before)
    # The first publish on the new primary: more posts out than the old primary had shown.
    wait_for(lambda: (now := try_published(pair.url())) and len(now) > count, 120)
    resumed = time.monotonic() - promoted
    pair.rebuild()
    return resumed


def run(mode_synchronous: bool, failovers: int) -> tuple[list[float], int, int, int, float]:
    """Return (resume times, posts published twice, lost, scheduled, worst standby lag)."""
    with ReplicatedPair(synchronous=mode_synchronous) as pair:
        env = env_for(pair.url(), INSTATIC_LEASE=str(LEASE), INSTATIC_DB_RETRY_MAX="1")
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=BASE_DIR,
            env=env,
            check=True,
        )
        mode = "sync" if mode_synchronous else "async"
        per_round = 12.0
        total = int((failovers + 1) * per_round / POST_EVERY) + 50
        schedule_posts(env, total, start=2)
        replicas = [Replica(f"failover-{mode}-{i}", env, "publishing") for i in range(3)]
        seen: dict[int, set[int]] = {}
        resumes: list[float] = []
        lags: list[float] = []
        try:
            for _ in range(failovers):
                time.sleep(per_round / 2)  # posts go out on the current primary meanwhile
                resumes.append(one_failover(pair, seen, lags))
            # Let the rest fall due and go out.
            last_due = per_round * (failovers + 1) + 2 + 60 * POST_EVERY
            deadline = time.monotonic() + last_due + 60
            while time.monotonic() < deadline:
                final = try_published(pair.url()) or {}
                if len(final) >= total:
                    break
                time.sleep(0.5)
        finally:
            for replica in replicas:
                replica.stop()
        final = published(pair.url())
    # Published twice: two events on the last primary, or an event the benchmark saw on an
    # earlier primary that is gone (the failover forgot it) while a new one went out.
    republished = sum(
        1 for post, ids in final.items() if len(ids) > 1 or (seen.get(post, ids) - ids)
    )
    lost = total - len(final)
    return resumes, republished, lost, total, max(lags)


def main() -> None:
    failovers = int(os.environ.get("BENCH_FAILOVERS", "5"))
    sync_resumes, sync_twice, sync_lost, sync_total, _ = run(True, failovers)
    async_resumes, async_twice, async_lost, async_total, async_lag = run(False, failovers)
    worst = max(sync_resumes)
    rows = [
        (
            f"sync: resume after promotion, worst of {failovers}",
            f"{worst:.2f} s",
            f"<= {LEASE + 5:.0f} s",
            worst <= LEASE + 5,
        ),
        ("sync: posts published twice", f"{sync_twice}", "0", sync_twice == 0),
        ("sync: posts lost", f"{sync_lost} of {sync_total}", "0", sync_lost == 0),
    ]
    print_table("bench/failover.py: three replicas, PostgreSQL 15 primary + standby", rows)
    print(
        f"  sync resume times: median {percentile(sync_resumes, 50):.2f} s, "
        + ", ".join(f"{t:.2f}" for t in sync_resumes)
    )
    print(
        f"  async ({failovers} failovers, a post due every {POST_EVERY} s): resume median "
        f"{percentile(async_resumes, 50):.2f} s, worst {max(async_resumes):.2f} s; "
        f"posts published twice after a failover forgot their publish: {async_twice}; "
        f"posts lost: {async_lost} of {async_total}; the standby's flush lag just before a "
        f"failover was at most {async_lag * 1000:.1f} ms (the window of commits at risk)"
    )
    if not all(ok for *_, ok in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
