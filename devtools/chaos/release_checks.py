"""The soak's invariants of releases: every one due went out, all of its posts' changes or
none, at its time and never before, no post changed twice by one. ``invariants.INVARIANTS``
lists them."""

from collections import Counter

from devtools.chaos.clock import clock_text, utc
from devtools.chaos.releases import (
    CHANGE_KINDS,
    post_states,
    release_events,
    release_items,
    release_rows,
)
from devtools.chaos.soak import Soak


def releases_go_out(soak: Soak, end_db) -> tuple[bool, str]:
    """Every release scheduled during the soak whose time passed before the settle phase
    ended went out (``released``): none is left scheduled, or back to draft, past its time.

    One the release code stopped (a ``problem``: an item can no longer apply) is left out
    and named in the detail; none is expected, as nothing edits a release's posts.
    """
    rows = release_rows(soak)
    settled = utc(soak.settled_db or soak.db_now())
    scheduled = {pk for pk, record in soak.releases.items() if record.release_at is not None}
    # The database's too: a schedule whose answer an error lost may still have committed.
    scheduled |= {pk for pk, row in rows.items() if row.status in ("scheduled", "released")}
    due, stuck, stopped = 0, [], []
    for pk in sorted(scheduled):
        row = rows.get(pk)
        record = soak.releases.get(pk)
        at = row.release_at if row is not None else None
        at = at or (record.release_at if record is not None else None)
        if row is None or at is None:
            stuck.append(f"release {pk} gone")
            continue
        if at >= settled:
            continue
        due += 1
        if row.status == "released":
            continue
        if row.problem:
            stopped.append(f"{row.name}: {row.problem[:80]}")
        else:
            stuck.append(f"{row.name} due {clock_text(soak.local_time(at))} {row.status}")
    detail = f"{due - len(stuck) - len(stopped)} of {due} due released"
    if stuck:
        detail += f"; {len(stuck)} not: " + "; ".join(stuck[:3])
    if stopped:
        detail += f"; !! {len(stopped)} stopped: " + "; ".join(stopped[:2])
    return not stuck, detail


def releases_all_or_nothing(soak: Soak, end_db) -> tuple[bool, str]:
    """A released release changed every one of its posts, each with exactly one event of its
    change (published / unpublished / revision_published) that carries the release's id, all
    at its ``released_at`` (a publish's post went live then too, a takedown's is down), and
    it holds every item the stream added; a release that has not gone out changed nothing:
    no event carries its id and its drafts are drafts."""
    rows = release_rows(soak)
    items = release_items(soak)
    events: dict[int, list] = {}
    for event in release_events(soak):
        events.setdefault(event.release, []).append(event)
    states = post_states(soak, {post for posts in items.values() for post in posts})
    problems = []
    changed = 0
    for pk, row in rows.items():
        got = events.get(pk, [])
        expected = items.get(pk, {})
        if row.status != "released":
            # Its drafts are drafts that never went live; its takedowns' posts are live.
            went = [
                post
                for post, action in expected.items()
                if (action == "publish" and states.get(post) != ("draft", None))
                or (action == "unpublish" and states.get(post, ("",))[0] != "published")
            ]
            if got or went:
                problems.append(
                    f"{row.name} ({row.status}): {len(got)} events, {len(went)} posts changed"
                )
            continue
        record = soak.releases.get(pk)
        lost = sorted(set(record.posts) - set(expected)) if record is not None else []
        counts = Counter((event.post_id, event.kind) for event in got)
        missing = [
            post for post, action in expected.items() if counts[(post, CHANGE_KINDS[action])] != 1
        ]
        extra = [
            post
            for post, kind in counts
            if post not in expected or kind != CHANGE_KINDS[expected[post]]
        ]
        off_time = [event.post_id for event in got if event.at != row.released_at]
        wrong_state = [
            post
            for post, action in expected.items()
            if (action == "publish" and states.get(post, ("", None))[1] != row.released_at)
            or (action == "unpublish" and states.get(post, ("", None))[0] != "unpublished")
        ]
        for what, posts in (
            ("items lost", lost),
            ("posts without their one event", missing),
            ("events of posts not its items", extra),
            ("events not at released_at", off_time),
            ("posts not changed", wrong_state),
        ):
            if posts:
                problems.append(f"{row.name}: {len(posts)} {what} (e.g. post {posts[0]})")
        changed += len(expected)
    released = sum(1 for row in rows.values() if row.status == "released")
    detail = f"{released} released, {changed} posts changed; {len(rows) - released} not released"
    return not problems, "; ".join(problems[:3]) or detail


def releases_never_early(soak: Soak, end_db) -> tuple[bool, str]:
    """No release went out before its time: ``released_at >= release_at``, the time in its row
    and the one the stream (or a quiet spell) last scheduled it at."""
    early = []
    released = [row for row in release_rows(soak).values() if row.status == "released"]
    for row in released:
        record = soak.releases.get(row.pk)
        times = [row.release_at] + ([record.release_at] if record and record.release_at else [])
        due = max(utc(at) for at in times if at is not None)
        if row.released_at is None:
            early.append(f"{row.name} released without a time")
        elif row.released_at < due:
            early.append(
                f"{row.name} went out {(due - row.released_at).total_seconds():.3f} s early"
            )
    lateness = [row.lateness for row in released if row.lateness is not None]
    detail = f"{len(early)} early of {len(released)}" + (
        f"; min lateness {min(lateness):.3f} s" if lateness else ""
    )
    return not early, "; ".join(early[:3]) or detail


def releases_once_per_post(soak: Soak, end_db) -> tuple[bool, str]:
    """No post has two events from one release: a release that went out twice (a second
    replica, a stale leader, a retried run) would write its events again."""
    counts = Counter((event.release, event.post_id) for event in release_events(soak))
    twice = sorted(key for key, n in counts.items() if n > 1)
    detail = f"{sum(counts.values())} events of {len({r for r, _ in counts})} releases"
    if twice:
        detail = f"{len(twice)} posts twice: " + ", ".join(
            f"post {post} of release {release} x{counts[(release, post)]}"
            for release, post in twice[:3]
        )
    return not twice, detail
