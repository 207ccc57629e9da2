"""The editors' stream: posts scheduled, rescheduled and cancelled through the editor actions.

Review is on: each post is submitted and approved before it is scheduled. Now and then an
editor tampers with a scheduled post behind the actions' back (its body changed in the
database after its approval): the publish job must hold it at its time, never publish it.

Between busy spells, quiet spells postpone everything (the release stream's releases too) and
schedule one lone post that only a wake-up of the leader gets out on time.
"""

import random
import time
from datetime import datetime, timedelta

from devtools.chaos.config import (
    JOBS,
    LONE_LEAD,
    POSTPONE_STEP,
    PROBE_JOB,
    QUIET_EVERY,
    QUIET_RELEASE_BEFORE,
    RELEASE_PAUSE,
    SCHEDULE_AHEAD,
    TAMPERED,
)
from devtools.chaos.image_checks import IMAGE_EVERY, image_body
from devtools.chaos.releases import postpone_releases, releases_paused
from devtools.chaos.soak import Soak


def editor_stream(soak: Soak, seed: int) -> None:
    """Schedule, reschedule and cancel posts through publishing.posts, continuously."""
    from django.db import close_old_connections, connection

    from coordination.clock import database_now
    from publishing import posts
    from publishing.models import Post, PostStatus

    rng = random.Random(seed)
    counter = 0
    lone = 0
    quiet_at = time.monotonic() + rng.uniform(*QUIET_EVERY)
    while not soak.stop_stream.is_set():
        if time.monotonic() >= quiet_at:
            lone += 1
            postponed_until = quiet_spell(soak, rng, f"chaos-{seed}-lone-{lone}")
            # The next spell would postpone the postponed posts again: they go live first.
            quiet_at = max(time.monotonic() + rng.uniform(*QUIET_EVERY), postponed_until + 0.5)
            continue
        try:
            close_old_connections()
            op = rng.choices(["schedule", "reschedule", "cancel", "tamper"], weights=[6, 2, 2, 1])[
                0
            ]
            now = database_now()
            if op == "schedule":
                counter += 1
                post = Post(title=f"Chaos post {counter}", slug=f"chaos-{seed}-{counter}")
                if counter % IMAGE_EVERY:
                    post.body = "Body."
                    post.save()
                else:
                    # As an editor saves it: the page's HTML (which shows the image) rendered.
                    post.body = image_body(soak, counter)
                    post = posts.save_post(post=post, user=None)
                approve(post)
                posts.schedule_post(
                    post=post, publish_at=now + timedelta(seconds=rng.uniform(1, 12)), user=None
                )
            else:
                candidates = list(
                    Post.objects.filter(status=PostStatus.SCHEDULED, last_error="")
                    .exclude(body__startswith=TAMPERED)
                    .values_list("pk", flat=True)[:50]
                )
                if candidates and op == "tamper":
                    tamper(rng.choice(candidates))
                elif candidates:
                    post = Post.objects.get(pk=rng.choice(candidates))
                    if op == "reschedule":
                        posts.reschedule_post(
                            post=post,
                            publish_at=now + timedelta(seconds=rng.uniform(1, 12)),
                            user=None,
                        )
                    else:
                        posts.cancel_schedule(post=post, user=None)
            soak.editor_ops[op] += 1
        except Exception:
            # A racing publish, a restarting server: editors see an error and carry on.
            soak.editor_errors += 1
            try:
                connection.close()
            except Exception:
                pass
        soak.stop_stream.wait(rng.uniform(0.05, 0.4))
    connection.close()


def approve(post) -> None:
    """Submit ``post`` for review and approve it as it is (both as Instatic's own user)."""
    from reviews import actions as reviews

    reviews.decide(review=reviews.submit_post(post=post, user=None), user=None, approve=True)


def tamper(pk: int) -> None:
    """Change a scheduled post's body behind the actions' back, after its approval.

    Only while it is still scheduled, in the statement that changes it: a post the publish job
    put live first is left as it went live, so what went live can be compared with what was
    approved.
    """
    from django.db.models import F

    from publishing.models import Post, PostStatus

    Post.objects.filter(pk=pk, status=PostStatus.SCHEDULED).update(
        body=f"{TAMPERED}: not what the reviewer read.", version=F("version") + 1
    )


def quiet_spell(soak: Soak, rng: random.Random, slug: str) -> float:
    """The editors postpone everything, then schedule one lone post as PROBE_JOB runs; return
    when (``time.monotonic``) the last postponed post is due.

    In the busy stream a new post is never the next one due (dozens are due sooner), so a lost
    wake-up costs a fraction of a second and nothing notices. Here nothing else is due before
    the probe's next slot (the other posts, and the releases due from a second before the
    slot, are postponed to just after it): the lone post goes live 0.5-1.5 s after a slot
    of PROBE_JOB, and its schedule commits (with its wake-up) as
    the probe's run starts: the leader has just read its jobs' state and checks its
    lock, and the run checks it again before it commits. A ``NOTIFY`` another query on the lock
    session read must still wake the leader: the probe's run ends as planned, which does not
    make the leader plan again, so if the wake-up is lost the post waits for the probe's next
    slot. The spell lasts until the post is live (at most a probe period and a bit), so the
    editors' next wake-ups cannot hide a late one.
    """
    from django.db import close_old_connections, connection, transaction

    from publishing import posts
    from publishing.models import Post, PostStatus

    live_after = timedelta(seconds=rng.uniform(0.5, 1.5))
    jitter = rng.uniform(-0.005, 0.015)
    period = JOBS[PROBE_JOB].period
    postponed_until = time.monotonic()
    try:
        close_old_connections()
        post = Post.objects.create(title=f"Chaos lone post {slug}", slug=slug, body="Body.")
        approve(post)
        slot, ready = next_probe_slot()
        until = slot + timedelta(seconds=period + 0.5)
        count = postpone_all(soak, until)
        # Releases too: one going out after the lone post's commit would get it out without
        # its wake-up. They go after the postponed posts.
        count += postpone_releases(
            soak, slot - timedelta(seconds=QUIET_RELEASE_BEFORE), until, first=count
        )
        postponed_until = ready + period + 0.5 + POSTPONE_STEP * count
        # Commit as the probe's run starts (its recent runs' lag behind their slots): within
        # about 15 ms of that a wake-up went missing (measured). Scheduling takes 10-80 ms on
        # a busy machine, so it is done just before, and only the commit is timed.
        commit_at = ready + probe_start_lag() + jitter
        start_at = commit_at - SCHEDULE_AHEAD
        # The release stream's work in this process (its Python holds the GIL) waits
        # meanwhile, so it cannot shift the commit.
        if soak.stop_stream.wait(max(0.0, start_at - RELEASE_PAUSE - time.monotonic())):
            return postponed_until
        with releases_paused(soak):
            if soak.stop_stream.wait(max(0.0, start_at - time.monotonic())):
                return postponed_until
            with transaction.atomic():
                posts.schedule_post(post=post, publish_at=slot + live_after, user=None)
                soak.stop_stream.wait(max(0.0, commit_at - time.monotonic()))
        soak.lone_commits.append((slug, slot, time.monotonic() - ready))
        soak.editor_ops["lone post"] += 1
        deadline = time.monotonic() + live_after.total_seconds() + period + 3
        while time.monotonic() < deadline and not soak.stop_stream.is_set():
            if Post.objects.filter(pk=post.pk, status=PostStatus.PUBLISHED).exists():
                break
            soak.stop_stream.wait(0.1)
    except Exception:
        soak.editor_errors += 1
        connection.close()
    return postponed_until


def postpone_all(soak: Soak, until: datetime) -> int:
    """Reschedule every scheduled post to ``until`` and after, POSTPONE_STEP apart, one at a
    time as editors would (errors are counted); return how many there were."""
    from django.db import connection

    from publishing import posts
    from publishing.models import Post, PostStatus

    scheduled = list(Post.objects.filter(status=PostStatus.SCHEDULED).values_list("pk", flat=True))
    for i, pk in enumerate(scheduled):
        try:
            post = Post.objects.get(pk=pk)
            if post.body.startswith(TAMPERED) or post.last_error:
                # Held for want of an approval (or about to be): an editor calls it off.
                posts.cancel_schedule(post=post, user=None)
                soak.editor_ops["cancel tampered"] += 1
                continue
            at = until + timedelta(seconds=POSTPONE_STEP * i)
            posts.reschedule_post(post=post, publish_at=at, user=None)
            soak.editor_ops["postpone"] += 1
        except Exception:
            soak.editor_errors += 1
            connection.close()
    return len(scheduled)


def probe_start_lag() -> float:
    """Median seconds from PROBE_JOB's last few slots to their runs' start (when the leader
    has read its jobs' state and checked its lock), 0.03 s before it has run."""
    from coordination.models import JobRun

    rows = (
        JobRun.objects.filter(job=PROBE_JOB, trigger=JobRun.Trigger.SCHEDULE)
        .exclude(started_at=None)
        .order_by("-slot")
        .values_list("slot", "started_at")[:5]
    )
    lags = sorted((started - slot).total_seconds() for slot, started in rows)
    lags = [lag for lag in lags if 0 <= lag < 1]  # not a catch-up after a fault
    return lags[len(lags) // 2] if lags else 0.03


def next_probe_slot() -> tuple[datetime, float]:
    """Return PROBE_JOB's first slot at least LONE_LEAD s ahead and when (``time.monotonic``)
    it comes (a slot LONE_LEAD s from now if its state is missing or far off)."""
    from coordination.clock import database_now
    from coordination.models import JobState

    period = timedelta(seconds=JOBS[PROBE_JOB].period)
    lead = timedelta(seconds=LONE_LEAD)
    slot = JobState.objects.filter(name=PROBE_JOB).values_list("next_due", flat=True).first()
    now = database_now()
    read = time.monotonic()
    if slot is None or slot - now > period + lead:
        slot = now + lead
    while slot - now < lead:
        slot += period
    return slot, read + (slot - now).total_seconds()
