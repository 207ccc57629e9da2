"""MariaDB at parity: three replicas on a throwaway MariaDB, PostgreSQL as the same-run baseline.

PostgreSQL wakes a leader with ``NOTIFY``; MariaDB has none, so there a leader sleeps until its
next due instant and its own heartbeat (which reads every group's wake-up counter in the same
statement that writes it) wakes it when an editor makes work due sooner. This measures, in one
run:

- publish lateness (``published_at - publish_at``, database clock) p50/p99/max of 500 posts
  scheduled at random instants over ``BENCH_SPREAD_SECONDS`` (60) with three publishing
  replicas, on MariaDB (target p99 <= 250 ms) and on PostgreSQL (the baseline; the ratio is
  printed);
- statements per replica per minute while idle on MariaDB (target <= 60), counted from the
  server's general query log over ``BENCH_IDLE_SECONDS`` (60) and attributed to replicas by the
  connection ids they record for fencing (``coordination_nodesession``);
- takeover on MariaDB after SIGKILL (target <= 2 s), a freeze (lease 10 s: target <= 12 s) and
  SIGTERM (target <= 1 s), and how long a SIGTERMed follower takes to exit (target <= 1 s).

Run: ``python -m bench.mariadb``.
"""

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from datetime import timedelta

import psycopg

from bench._harness import (
    BASE_DIR,
    Replica,
    env_for,
    migrated_site,
    percentile,
    print_table,
    wait_for,
)
from devtools import freezing
from devtools.mariadb import MariaDBServer, client_library_available, find_server

LEASE = 10.0
POSTS = 500
# One general-log entry: "<date> <time>\t<id> <command>\t<text>" (date and time only on the
# first entry of a second).
LOGGED = re.compile(r"^(?:\d{6}\s+[\d:]+)?\s+(\d+) (Query|Execute)\t(.{0,60})", re.MULTILINE)


@contextmanager
def mariadb_site(**env_extra: str):
    """Yield (server, DB-API connection, process env) for a migrated throwaway MariaDB site."""
    with MariaDBServer(extra_args=["--general-log=1", "--general-log-file=general.log"]) as server:
        env = env_for(server.url("instatic"), **env_extra)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=BASE_DIR,
            env=env,
            check=True,
        )
        import MySQLdb

        conn = MySQLdb.connect(
            host="127.0.0.1", port=server.port, user="root", database="instatic", autocommit=True
        )
        try:
            yield server, conn, env
        finally:
            conn.close()


def query(conn, sql: str, params=()):
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def leader(conn, group: str = "publishing") -> str | None:
    rows = query(conn, "SELECT node FROM coordination_leadership WHERE `group` = %s", (group,))
    return rows[0][0] if rows else None


def insert_posts(conn, prefix: str, offsets: list[float]) -> None:
    """Insert scheduled posts due at NOW() + offset, then wake the leader as an editor would.

    ``coordination.services.request_wakeup`` lowers the publish job's ``wake_at`` and, after
    commit, bumps the publishing group's wake-up counter.
    """
    ((now,),) = query(conn, "SELECT NOW(6)")
    rows = [
        (f"{prefix} {i}", f"{prefix}-{i}", "Body.", "scheduled", now + timedelta(seconds=offset))
        for i, offset in enumerate(offsets)
    ]
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO publishing_post (title, slug, body, status, publish_at, last_error,"
            " created_at, updated_at, updated_by, version)"
            " VALUES (%s, %s, %s, %s, %s, '', NOW(6), NOW(6), '', 1)",
            rows,
        )
        wake = now + timedelta(seconds=min(offsets))
        cursor.execute(
            "UPDATE coordination_jobstate SET wake_at = LEAST(COALESCE(wake_at, %s), %s)"
            " WHERE name = 'publishing.publish_due'",
            (wake, wake),
        )
        cursor.execute(
            "INSERT INTO coordination_wakeup (`group`, seq) VALUES ('publishing', 1)"
            " ON DUPLICATE KEY UPDATE seq = seq + 1"
        )


def insert_posts_postgresql(conn, prefix: str, offsets: list[float]) -> None:
    """The same posts on PostgreSQL, woken as ``request_wakeup`` does there (``NOTIFY``)."""
    now = conn.execute("SELECT now()").fetchone()[0]
    with conn.transaction():
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO publishing_post (title, slug, body, status, publish_at, last_error,"
                " created_at, updated_at, updated_by, version)"
                " VALUES (%s, %s, %s, %s, %s, '', now(), now(), '', 1)",
                [
                    (
                        f"{prefix} {i}",
                        f"{prefix}-{i}",
                        "Body.",
                        "scheduled",
                        now + timedelta(seconds=o),
                    )
                    for i, o in enumerate(offsets)
                ],
            )
        wake = now + timedelta(seconds=min(offsets))
        conn.execute(
            "UPDATE coordination_jobstate SET wake_at = LEAST(COALESCE(wake_at, %s), %s)"
            " WHERE name = 'publishing.publish_due'",
            (wake, wake),
        )
        conn.execute("SELECT pg_notify('instatic_wakeup_publishing', '')")


def scheduled(conn) -> int:
    return query(conn, "SELECT count(*) FROM publishing_post WHERE status = 'scheduled'")[0][0]


def lateness_mariadb(spread: float) -> list[float]:
    rng = random.Random(42)
    with mariadb_site() as (_server, conn, env):
        replicas = [Replica(f"maria-pub-{i}", env, "publishing") for i in range(1, 4)]
        try:
            wait_for(lambda: leader(conn), 60)
            insert_posts(conn, "spread", [2 + rng.random() * spread for _ in range(POSTS)])
            wait_for(lambda: scheduled(conn) == 0, spread + 60, interval=0.5)
            return [
                float(row[0]) / 1e6
                for row in query(
                    conn,
                    "SELECT TIMESTAMPDIFF(MICROSECOND, publish_at, published_at)"
                    " FROM publishing_post WHERE slug LIKE 'spread-%%'",
                )
            ]
        finally:
            for replica in replicas:
                replica.stop()


def lateness_postgresql(spread: float) -> list[float]:
    rng = random.Random(42)
    with migrated_site() as (_cluster, url, env):
        replicas = [Replica(f"pg-pub-{i}", env, "publishing") for i in range(1, 4)]
        conn = psycopg.connect(url, autocommit=True)
        try:
            wait_for(
                lambda: conn.execute(
                    "SELECT 1 FROM coordination_leadership WHERE \"group\" = 'publishing'"
                ).fetchone(),
                60,
            )
            insert_posts_postgresql(
                conn, "spread", [2 + rng.random() * spread for _ in range(POSTS)]
            )
            wait_for(
                lambda: (
                    conn.execute(
                        "SELECT count(*) FROM publishing_post WHERE status = 'scheduled'"
                    ).fetchone()[0]
                    == 0
                ),
                spread + 60,
                interval=0.5,
            )
            return [
                row[0]
                for row in conn.execute(
                    "SELECT extract(epoch FROM published_at - publish_at)::float"
                    " FROM publishing_post WHERE slug LIKE 'spread-%'"
                )
            ]
        finally:
            conn.close()
            for replica in replicas:
                replica.stop()


def idle_and_takeovers(idle_seconds: float) -> dict:
    """Idle statements per replica per minute, then takeover times, on MariaDB."""
    with mariadb_site(INSTATIC_LEASE=str(LEASE)) as (server, conn, env):
        replicas = {f"maria-{i}": Replica(f"maria-{i}", env) for i in range(1, 4)}
        try:
            wait_for(lambda: leader(conn) and leader(conn, "plugins"), 60)
            # Let start-up work finish: first ticks, and the maintenance pass one lease later.
            time.sleep(LEASE + 5)
            log_path = server.workdir / "data" / "general.log"
            offset = log_path.stat().st_size
            time.sleep(idle_seconds)
            with open(log_path, errors="replace") as f:
                f.seek(offset)
                text = f.read()
            owners = dict(query(conn, "SELECT connection_id, node FROM coordination_nodesession"))
            matches = [m for m in LOGGED.finditer(text) if int(m[1]) in owners]
            counts = Counter(owners[int(m[1])] for m in matches)
            busiest = max(counts, key=counts.get) if counts else None
            kinds = Counter(m[3] for m in matches if owners[int(m[1])] == busiest)
            result = {
                "per_minute": {n: counts.get(n, 0) * 60 / idle_seconds for n in replicas},
                "kinds": kinds,
                "busiest": busiest,
            }
            result["kill"] = takeover(conn, replicas, lambda r: r.process.kill())
            frozen = {}

            def freeze(replica):
                frozen["r"] = replica
                freezing.freeze(replica.process.pid)

            result["freeze"] = takeover(conn, replicas, freeze)
            os.kill(frozen["r"].process.pid, signal.SIGCONT)
            result["term"] = takeover(conn, replicas, lambda r: r.process.terminate())
            result["follower_exit"] = follower_exit(conn, env, replicas)
            return result
        finally:
            for replica in replicas.values():
                replica.stop()


def takeover(conn, replicas: dict, action) -> float:
    old = wait_for(lambda: leader(conn), 30)
    start = time.monotonic()
    action(replicas[old])
    wait_for(lambda: (name := leader(conn)) and name != old, 60)
    return time.monotonic() - start


def follower_exit(conn, env: dict, replicas: dict) -> float:
    """Seconds from SIGTERM to exit of a new follower waiting in ``GET_LOCK`` for both groups."""
    follower = replicas["maria-4"] = Replica("maria-4", env)
    # Both of its lock connections are open (recorded) once it waits for both groups' locks.
    wait_for(
        lambda: (
            query(
                conn,
                "SELECT count(*) FROM coordination_nodesession WHERE node = 'maria-4'"
                " AND role = 'lock'",
            )[0][0]
            >= 2
        ),
        60,
    )
    start = time.monotonic()
    follower.process.terminate()
    follower.process.wait(30)
    return time.monotonic() - start


def main() -> None:
    if not (find_server() and client_library_available()):
        print("bench/mariadb.py: SKIPPED (mariadbd or the mysqlclient library is not installed)")
        if os.environ.get("CI", "").lower() == "true":
            raise SystemExit(1)
        return
    spread = float(os.environ.get("BENCH_SPREAD_SECONDS", "60"))
    idle_seconds = float(os.environ.get("BENCH_IDLE_SECONDS", "60"))
    baseline = lateness_postgresql(spread)
    lateness = lateness_mariadb(spread)
    measured = idle_and_takeovers(idle_seconds)

    pg_p99 = percentile(baseline, 99) * 1000
    p50, p99, worst = (percentile(lateness, q) * 1000 for q in (50, 99, 100))
    early = sum(1 for value in lateness if value < 0)
    idle = max(measured["per_minute"].values())
    rows = [
        (
            f"MariaDB lateness p50 ({len(lateness)} posts, {spread:.0f} s)",
            f"{p50:.0f} ms",
            "-",
            True,
        ),
        ("MariaDB lateness p99", f"{p99:.0f} ms", "<= 250 ms", p99 <= 250),
        ("MariaDB lateness max", f"{worst:.0f} ms", "-", True),
        ("PostgreSQL lateness p99 (same run)", f"{pg_p99:.0f} ms", "-", True),
        ("MariaDB p99 / PostgreSQL p99", f"{p99 / max(pg_p99, 1):.2f}", "-", True),
        ("MariaDB posts published early", str(early), "0", early == 0),
        ("MariaDB idle statements / replica / min", f"{idle:.0f}", "<= 60", idle <= 60),
        (
            "MariaDB takeover after SIGKILL",
            f"{measured['kill']:.2f} s",
            "<= 2 s",
            measured["kill"] <= 2,
        ),
        (
            f"MariaDB takeover after freeze (lease {LEASE:.0f} s)",
            f"{measured['freeze']:.2f} s",
            f"<= {LEASE + 2:.0f} s",
            measured["freeze"] <= LEASE + 2,
        ),
        (
            "MariaDB takeover after SIGTERM",
            f"{measured['term']:.2f} s",
            "<= 1 s",
            measured["term"] <= 1,
        ),
        (
            "MariaDB follower exit after SIGTERM",
            f"{measured['follower_exit']:.2f} s",
            "<= 1 s",
            measured["follower_exit"] <= 1,
        ),
    ]
    if os.environ.get("BENCH_SHOW_STATEMENTS"):
        print(f"  statements of the busiest replica ({measured['busiest']}) while idle:")
        for sql, n in measured["kinds"].most_common(15):
            print(f"    {n:4d}  {sql}")
    print_table("bench/mariadb.py: three replicas on MariaDB, PostgreSQL as the baseline", rows)
    print(
        "  idle statements/min per replica: "
        + ", ".join(f"{n}={v:.0f}" for n, v in measured["per_minute"].items())
    )
    if not all(ok for *_, ok in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
