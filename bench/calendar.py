"""The admin calendar with 10,000 scheduled items, on a throwaway PostgreSQL.

``python -m bench.calendar`` (or ``python -m bench calendar``) starts a cluster, migrates,
inserts ``BENCH_CALENDAR_POSTS`` (default 10,000) scheduled posts spread over the calendar's
four weeks (a fifth of them with an unpublish time too, some failed, some late), and prints
the server time of a whole calendar request (session, user, the editor's zone, the two item
queries, grouping, rendering) through Django's test client, next to a baseline: a plain
SELECT of the same rows (both queries, fetched by psycopg through Django's connection). The
ratio is the calendar's cost over just reading what it shows. Target: ratio <= 4 (absolute
times depend on the machine, so they are printed, not judged). ``BENCH_CALENDAR_ROUNDS``
(default 30) sets the samples per measurement.
"""

import os
import random
import statistics
import sys
from datetime import timedelta

import psycopg

from bench._harness import migrated_django, print_table, timed
from devtools.pgcluster import PostgresCluster

POSTS = int(os.environ.get("BENCH_CALENDAR_POSTS", "10000"))
ROUNDS = int(os.environ.get("BENCH_CALENDAR_ROUNDS", "30"))
RATIO_TARGET = 4.0
DATABASE = "instatic_bench_calendar"

BASELINE_SQL = [
    "SELECT id, title, publish_at, last_error FROM publishing_post"
    " WHERE status = 'scheduled' AND publish_at < %s ORDER BY publish_at, id",
    "SELECT id, title, unpublish_at, status FROM publishing_post"
    " WHERE (status = 'scheduled' AND unpublish_at >= %s AND unpublish_at < %s)"
    " OR (status = 'published' AND unpublish_at < %s) ORDER BY unpublish_at, id",
]


def insert_posts(cursor, now, start, days: int) -> None:
    """Insert POSTS scheduled posts over ``days`` days from ``start``, some late or failed."""
    rng = random.Random(13)
    with cursor.copy(
        "COPY publishing_post (title, slug, body, status, publish_at, unpublish_at, last_error,"
        " created_at, updated_at, updated_by, version) FROM STDIN"
    ) as copy:
        for i in range(POSTS):
            at = start + timedelta(seconds=rng.uniform(0, days * 86400))
            unpublish = at + timedelta(days=rng.uniform(1, 10)) if i % 5 == 0 else None
            error = "the body is empty" if i % 500 == 0 else ""
            copy.write_row(
                (
                    f"Post {i}",
                    f"post-{i}",
                    "Body.",
                    "scheduled",
                    at,
                    unpublish,
                    error,
                    now,
                    now,
                    "bench",
                    1,
                )
            )


def measure() -> bool:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.urls import reverse
    from django.utils import timezone

    from coordination.clock import database_now
    from editors.models import EditorProfile
    from publishing import calendar

    now = database_now()
    zone = timezone.get_current_timezone()
    first = calendar.week_start(now.astimezone(zone).date())
    window_start = calendar.midnight(first, zone)
    window_end = calendar.midnight(first + timedelta(weeks=4), zone)
    with connection.cursor() as cursor:
        insert_posts(cursor.cursor, now, window_start, 28)
        cursor.execute("ANALYZE publishing_post")
    user = User.objects.create_superuser("bench", "bench@example.com", "pw")
    EditorProfile.objects.create(user=user, time_zone="Asia/Tokyo")
    client = Client()
    client.force_login(user)
    url = reverse("admin:publishing_post_calendar")

    def page():
        response = client.get(url)
        assert response.status_code == 200, response.status_code
        return response

    def baseline():
        with connection.cursor() as cursor:
            cursor.execute(BASELINE_SQL[0], [window_end])
            rows = cursor.fetchall()
            cursor.execute(BASELINE_SQL[1], [window_start, window_end, window_end])
            rows += cursor.fetchall()
        return rows

    rows = len(baseline())
    html = page().content.decode()
    for _ in range(3):  # warm caches, templates, the query plans
        page()
        baseline()
    calendar_ms = timed(page, ROUNDS)
    baseline_ms = timed(baseline, ROUNDS)
    p50, base = statistics.median(calendar_ms), statistics.median(baseline_ms)
    ratio = p50 / base
    drawn = html.count('<li class="entry')
    print(
        f"{POSTS:,} scheduled posts, {rows:,} rows in the window (publishes and unpublishes), "
        f"{drawn} items drawn, page {len(html) / 1024:.0f} KiB, {ROUNDS} rounds"
    )
    print(f"  calendar request  p50 {p50:8.1f} ms   p90 {_p90(calendar_ms):8.1f} ms")
    print(f"  baseline SELECT   p50 {base:8.1f} ms   p90 {_p90(baseline_ms):8.1f} ms")
    rows_table = [
        (
            "calendar / baseline (p50)",
            f"{ratio:.2f}x",
            f"<= {RATIO_TARGET}x",
            ratio <= RATIO_TARGET,
        ),
    ]
    print_table("Calendar of 10,000 scheduled items", rows_table)
    return all(ok for *_, ok in rows_table)


def _p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10)[-1]


def main() -> int:
    with PostgresCluster() as cluster:
        with psycopg.connect(cluster.url("postgres"), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {DATABASE}")
            version = admin.execute("SHOW server_version").fetchone()[0]
        migrated_django(cluster.url(DATABASE))
        print(f"PostgreSQL {version} on 127.0.0.1:{cluster.port}, psycopg {psycopg.__version__}")
        return 0 if measure() else 1


if __name__ == "__main__":
    sys.exit(main())
