"""The soak's invariant of reviews: what went live is exactly what a reviewer approved.

Review is on in the soak (``config.REVIEW_ENV``): the streams submit and approve each post and
release before scheduling it, and the editors' stream tampers with some scheduled posts after
their approval (``editors.tamper``). Nothing changes a post once it is live, so each post's
text now is the text that went live: it must equal the snapshot of an approved review of the
post, or of the release that put it live. ``invariants.INVARIANTS`` lists it.
"""

import json

from devtools.chaos.config import TAMPERED
from devtools.chaos.soak import Soak


def _json(value):
    return json.loads(value) if isinstance(value, (str, bytes)) else value  # MariaDB: text


def approved_snapshots(soak: Soak) -> tuple[set, set]:
    """Return the approved posts' texts ``(post_id, title, slug, body)`` and the approved
    releases' published items ``(release_id, post_id, title, slug, body)``."""
    posts, items = set(), set()
    for target, post_id, release_id, snapshot in soak.query(
        "SELECT target, post_id, release_id, snapshot FROM publishing_review"
        " WHERE status = 'approved'"
    ):
        snapshot = _json(snapshot) or {}
        if target == "post":
            posts.add((post_id, snapshot.get("title"), snapshot.get("slug"), snapshot.get("body")))
        elif target == "release":
            for item in snapshot.get("items", ()):
                if item.get("action") == "publish":
                    items.add(
                        (
                            release_id,
                            item.get("post_id"),
                            item.get("title"),
                            item.get("slug"),
                            item.get("body"),
                        )
                    )
    return posts, items


def live_content_was_approved(soak: Soak, end_db) -> tuple[bool, str]:
    """Every post that went live went live as a reviewer approved it, through the publish job
    or a release; no tampered post went live, and the tampered ones due were held."""
    posts, items = approved_snapshots(soak)
    texts = {
        pk: (title, slug, body)
        for pk, title, slug, body in soak.query("SELECT id, title, slug, body FROM publishing_post")
    }
    checked, unapproved = 0, []
    for post_id, data in soak.query(
        "SELECT post_id, data FROM publishing_publishevent WHERE kind = 'published'"
    ):
        data = _json(data) or {}
        text = texts.get(post_id)
        if text is None:
            continue  # deleted since
        checked += 1
        release = data.get("release")
        if release is not None:
            approved = (int(release), post_id, *text) in items
        else:
            approved = (post_id, *text) in posts
        if not approved:
            unapproved.append(post_id)
    # Held at its time: the publish job recorded a failure (then a quiet spell may have
    # called it off); the others were called off before their time.
    tampered, held = soak.query(
        "SELECT count(DISTINCT p.id), count(DISTINCT e.post_id) FROM publishing_post p LEFT JOIN"
        " publishing_publishevent e ON e.post_id = p.id AND e.kind = 'failed'"
        " WHERE p.body LIKE %s",
        (f"{TAMPERED}%",),
    )[0]
    return (
        not unapproved,
        f"{checked} went live, {len(unapproved)} not as approved {unapproved[:5]};"
        f" {tampered} tampered, {held} of them held at their time",
    )
