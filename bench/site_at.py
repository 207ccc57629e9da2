"""The site at a moment with 100,000 posts and 1,000 scheduled changes, on a throwaway PostgreSQL.

``python -m bench.site_at`` (or ``python -m bench site_at``) starts a cluster, migrates,
inserts ``BENCH_SITE_AT_POSTS`` (default 100,000) live posts and ``BENCH_SITE_AT_CHANGES``
(default 1,000) scheduled changes over the coming week (publishes of scheduled posts, takedowns
of live ones, revisions of live ones), then times, through Django's test client, the site's
index and a post at three moments (an hour, a day and a week ahead, so the changes applied
grow from a few to all of them), as an editor sees them and through a shared link (anonymous),
next to the same run's public index and post: the baseline.
Targets: every page at every moment <= 3x its public page (p50; the two timed in turns, so
the machine's other work weighs on both alike). ``BENCH_SITE_AT_ROUNDS``
(default 20) sets the samples per measurement.
"""

import os
import random
import statistics
import sys
from datetime import timedelta

import psycopg

from bench._harness import migrated_django, print_table, timed, timed_beside
from devtools.pgcluster import PostgresCluster

POSTS = int(os.environ.get("BENCH_SITE_AT_POSTS", "100000"))
CHANGES = int(os.environ.get("BENCH_SITE_AT_CHANGES", "1000"))
ROUNDS = int(os.environ.get("BENCH_SITE_AT_ROUNDS", "20"))
RATIO_TARGET = 3.0
DATABASE = "instatic_bench_site_at"
WEEK = 7 * 86400


def insert_site(cursor, now) -> None:
    """Insert POSTS live posts, then CHANGES scheduled changes spread over the coming week:
    a third publishes of new scheduled posts, a third takedowns, a third revisions."""
    rng = random.Random(7)
    columns = (
        "title, slug, body, body_html, excerpt, status, publish_at, published_at, unpublish_at,"
        " last_error, created_at, updated_at, updated_by, version, preview_generation"
    )
    live = POSTS
    scheduled = CHANGES // 3
    takedowns = set(rng.sample(range(live), CHANGES // 3))
    with cursor.copy(f"COPY publishing_post ({columns}) FROM STDIN") as copy:
        for i in range(live + scheduled):
            is_live = i < live
            published = now - timedelta(seconds=(live - i) * 60) if is_live else None
            publish_at = None if is_live else now + timedelta(seconds=rng.uniform(60, WEEK))
            unpublish = now + timedelta(seconds=rng.uniform(60, WEEK)) if i in takedowns else None
            copy.write_row(
                (
                    f"Post {i}",
                    f"post-{i}",
                    f"The body of post {i}.",
                    f"<p>The body of post {i}.</p>",
                    f"The body of post {i}.",
                    "published" if is_live else "scheduled",
                    publish_at,
                    published,
                    unpublish,
                    "",
                    now,
                    now,
                    "bench",
                    1,
                    0,
                )
            )
    cursor.execute("SELECT min(id) FROM publishing_post")
    first = cursor.fetchone()[0]
    revised = rng.sample(
        [n for n in range(live) if n not in takedowns], CHANGES - 2 * (CHANGES // 3)
    )
    with cursor.copy(
        "COPY publishing_postrevision (post_id, number, title, body, body_html, excerpt, status,"
        " publish_at, created_at, note, closed_by) FROM STDIN"
    ) as copy:
        for n in revised:
            copy.write_row(
                (
                    first + n,
                    1,
                    f"Post {n}, revised",
                    "Revised.",
                    "<p>Revised.</p>",
                    "Revised.",
                    "scheduled",
                    now + timedelta(seconds=rng.uniform(60, WEEK)),
                    now,
                    "",
                    "",
                )
            )


def measure() -> bool:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from coordination.clock import database_now
    from publishing.site_at_links import shared_link

    now = database_now()
    with connection.cursor() as cursor:
        insert_site(cursor.cursor, now)
        cursor.execute("ANALYZE publishing_post")
        cursor.execute("ANALYZE publishing_postrevision")
    user = User.objects.create_superuser("bench", "bench@example.com", "pw")
    client = Client()
    client.force_login(user)
    slug = f"post-{POSTS - 1}"

    anonymous = Client()

    def getter(url: str, params: dict | None = None, *, asker=client):
        """Return an action that GETs ``url`` as ``asker`` (the editor) and expects a 200."""

        def get():
            response = asker.get(url, params or {})
            assert response.status_code == 200, (url, response.status_code)
            return response

        return get

    public = {
        "index": getter(reverse("publishing:index")),
        "post": getter(reverse("publishing:post_detail", kwargs={"slug": slug})),
    }
    moments = {
        "an hour": timedelta(hours=1),
        "a day": timedelta(days=1),
        "a week": timedelta(weeks=1, hours=1),
    }
    rows, ok = [], True
    baseline = {}
    for name, get in public.items():
        for _ in range(3):
            get()
        baseline[name] = statistics.median(timed(get, ROUNDS))
        print(f"  public {name:5}             p50 {baseline[name]:8.1f} ms")
    for label, ahead in moments.items():
        params = {"at": (now + ahead).isoformat()}
        link = shared_link(at=now + ahead, user=user, expires_in=timedelta(hours=12))
        pages = {
            "index": getter(reverse("admin:publishing_post_site_at"), params),
            "post": getter(
                reverse("admin:publishing_post_site_at_post", kwargs={"slug": slug}), params
            ),
            "shared index": getter(link, asker=anonymous),
            "shared post": getter(f"{link}posts/{slug}/", asker=anonymous),
        }
        html = pages["index"]().content.decode()
        changed = html.count('<li class="done">') + html.count('<li class="not-done">')
        for name, get in pages.items():
            for _ in range(3):
                get()
            public_page = name.removeprefix("shared ")
            samples, beside = timed_beside(get, public[public_page], ROUNDS)
            p50 = statistics.median(samples)
            ratio = p50 / statistics.median(beside)
            line = f"{name:12} at {label:7} ({changed:4} changes)  p50 {p50:8.1f} ms  {ratio:.2f}x"
            print(f"  {line}")
            good = ratio <= RATIO_TARGET
            ok = ok and good
            rows.append(
                (
                    f"{name} at {label} / public {public_page}",
                    f"{ratio:.2f}x",
                    f"<= {RATIO_TARGET}x",
                    good,
                )
            )
    print_table(f"The site at a moment: {POSTS:,} posts, {CHANGES:,} scheduled changes", rows)
    return ok


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
