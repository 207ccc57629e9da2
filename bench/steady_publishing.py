"""Publish lateness at a steady pace with the outbox on, beside the same run with it off.

Three ``runscheduler`` replicas (both groups) on a throwaway PostgreSQL, in two phases of one
run, each with fresh replicas and fresh posts:

- **Outbox off**: the site without the outbox app (``BENCH_WITHOUT_OUTBOX=1``): posts go out
  and write their events, which nothing dispatches.
- **Outbox on**, as a site runs by default: the outbox app, one transactional subscriber
  (bench/_subscriberapp, one ``INSERT`` per event) and a webhook endpoint on a loopback
  receiver in this process, plugin jobs on two worker processes per replica.

In each phase, once every replica's worker processes are up and a few posts have gone out
unmeasured (the replicas' first runs), ``BENCH_STEADY_POSTS`` (300) posts are scheduled at
random instants over ``BENCH_STEADY_SPREAD`` (20 s), as editors schedule them. Lateness is
``published_at - publish_at`` (both by the database clock). Target: p99 <= 25 ms with the
outbox on, printed beside the phase with it off.

Checked: every post published once (one ``published`` event each), and with the outbox on
every event delivered once to the subscriber and once to the webhook, whose delivery ids the
receiver got.
"""

import os
import random
from datetime import timedelta

import psycopg

from bench import _report
from bench._harness import migrated_site, percentile, print_table, wait_for
from bench.outbox import (
    CREATE_TABLE,
    REPLICAS,
    SUBSCRIBER,
    WEBHOOK_ENV,
    add_endpoint,
    run_on_env,
    start_replicas,
    wait_ready,
)
from bench.publishing import any_scheduled, insert_posts, wake
from tests.support.webhook_receiver import Behaviour, WebhookReceiver

TARGET_P99_MS = 25.0
#: Worker processes per replica (``run_on_env("workers")``).
WORKERS_PER_REPLICA = 2
#: Posts published before each phase's measured ones, over two seconds.
WARM_UP_POSTS = 20


def publish_steadily(conn, prefix: str, *, posts: int, spread: float, rng) -> list[float]:
    """Schedule ``posts`` posts over ``spread`` seconds from now and wait until they are
    out; return their lateness (seconds)."""
    with conn.transaction():
        start = conn.execute("SELECT statement_timestamp()").fetchone()[0]
        offsets = sorted(1.0 + rng.random() * spread for _ in range(posts))
        due = [start + timedelta(seconds=offset) for offset in offsets]
        insert_posts(conn, prefix, due)
        wake(conn, due[0])
    wait_for(lambda: not any_scheduled(conn, due[-1]), spread + 120, interval=0.2)
    return [
        value
        for (value,) in conn.execute(
            "SELECT extract(epoch FROM published_at - publish_at)::float8 FROM publishing_post"
            " WHERE slug LIKE %s",
            (f"{prefix}-%",),
        )
    ]


def warmed_up(conn, phase: str, rng) -> None:
    """Wait for every replica's worker processes, then publish a few posts unmeasured: the
    replicas' first runs (and their workers' start-up, on the same two cores) are not what
    the figure is about."""
    wait_for(
        lambda: (
            conn.execute(
                "SELECT count(*) FROM coordination_node WHERE role = 'worker'"
                " AND stopped_at IS NULL AND name LIKE %s",
                (f"outbox-{phase}-%",),
            ).fetchone()[0]
            >= REPLICAS * WORKERS_PER_REPLICA
        ),
        120,
        0.1,
    )
    publish_steadily(conn, f"{phase}-warm-up", posts=WARM_UP_POSTS, spread=2.0, rng=rng)


def deliveries(conn, prefix: str, to: str) -> int:
    """Return how many of the phase's posts' events have one succeeded delivery to ``to``."""
    return conn.execute(
        "SELECT count(DISTINCT d.event_id) FROM outbox_delivery d"
        " JOIN publishing_post p ON p.id = d.post_id"
        " WHERE d.subscriber = %s AND d.status = 'succeeded' AND p.slug LIKE %s",
        (to, f"{prefix}-%"),
    ).fetchone()[0]


def events_per_post(conn, prefix: str) -> tuple[int, int]:
    """Return (published events, distinct posts) of the phase's posts."""
    return conn.execute(
        "SELECT count(*), count(DISTINCT e.post_id) FROM publishing_publishevent e"
        " JOIN publishing_post p ON p.id = e.post_id"
        " WHERE e.kind = 'published' AND p.slug LIKE %s",
        (f"{prefix}-%",),
    ).fetchone()


def main() -> None:
    posts = int(os.environ.get("BENCH_STEADY_POSTS", "300"))
    spread = float(os.environ.get("BENCH_STEADY_SPREAD", "20"))
    rng = random.Random(25)
    with (
        migrated_site(
            DJANGO_SETTINGS_MODULE="bench._settings", BENCH_JOBS="0", **run_on_env("workers")
        ) as (_cluster, url, env),
        WebhookReceiver(Behaviour(body=b"ok")) as receiver,
    ):
        conn = psycopg.connect(url, autocommit=True, application_name="bench")
        conn.execute(CREATE_TABLE)
        replicas = start_replicas({**env, "BENCH_WITHOUT_OUTBOX": "1"}, "off")
        try:
            wait_ready(conn, subscriber=False)
            warmed_up(conn, "off", rng)
            off = publish_steadily(conn, "off-steady", posts=posts, spread=spread, rng=rng)
            for replica in replicas:
                replica.stop()
            webhook = add_endpoint(conn, receiver.url())
            replicas = start_replicas({**env, **WEBHOOK_ENV, "BENCH_SUBSCRIBER": "1"}, "on")
            wait_ready(conn, subscriber=True)
            warmed_up(conn, "on", rng)
            on = publish_steadily(conn, "on-steady", posts=posts, spread=spread, rng=rng)
            wait_for(lambda: deliveries(conn, "on-steady", webhook) >= posts, 120, interval=0.2)
            wait_for(lambda: deliveries(conn, "on-steady", SUBSCRIBER) >= posts, 120, interval=0.2)
            delivered = (
                deliveries(conn, "on-steady", SUBSCRIBER),
                deliveries(conn, "on-steady", webhook),
            )
            received = {r.headers.get("webhook-id", "") for r in receiver.requests}
            hook_ids = {
                str(value)
                for (value,) in conn.execute(
                    "SELECT delivery_id FROM outbox_delivery WHERE subscriber = %s", (webhook,)
                )
            }
            counts = {phase: events_per_post(conn, f"{phase}-steady") for phase in ("off", "on")}
        finally:
            conn.close()
            for replica in replicas:
                replica.stop()
    off_p50, off_p99 = (percentile(off, q) * 1000 for q in (50, 99))
    on_p50, on_p99, on_max = (percentile(on, q) * 1000 for q in (50, 99, 100))
    for label, values in (("outbox off", off), ("outbox on", on)):
        _report.samples(f"publish lateness, {label}", [v * 1000 for v in values], unit="ms")
    _report.figure(
        f"publish lateness p99, {posts} posts over {spread:.0f} s, outbox on",
        on_p99,
        unit="ms",
        baseline=off_p99,
        baseline_name="outbox off",
        target=f"<= {TARGET_P99_MS:.0f} ms",
        ok=on_p99 <= TARGET_P99_MS,
    )
    table = [
        (
            f"publish lateness p50 / p99, outbox off ({len(off)} posts over {spread:.0f} s)",
            f"{off_p50:.0f} / {off_p99:.0f} ms",
            "-",
            True,
        ),
        (f"publish lateness p50, outbox on ({len(on)} posts)", f"{on_p50:.0f} ms", "-", True),
        (
            "publish lateness p99, outbox on",
            f"{on_p99:.0f} ms",
            f"<= {TARGET_P99_MS:.0f} ms",
            on_p99 <= TARGET_P99_MS,
        ),
        ("publish lateness max, outbox on", f"{on_max:.0f} ms", "-", True),
        (
            "published events / posts, off and on",
            " and ".join("{}/{}".format(*counts[phase]) for phase in ("off", "on")),
            f"{posts}/{posts} each",
            all(counts[phase] == (posts, posts) for phase in ("off", "on")),
        ),
        (
            "events delivered once to the subscriber / to the webhook",
            "{}/{}".format(*delivered),
            f"{posts}/{posts}",
            delivered == (posts, posts),
        ),
        (
            "webhook delivery ids the receiver did not get",
            str(len(hook_ids - received)),
            "0",
            not hook_ids - received,
        ),
    ]
    print_table(
        "bench/steady_publishing.py: three replicas on a throwaway PostgreSQL, plugin jobs on"
        " workers",
        table,
    )
    if not all(ok for *_, ok in table):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
