"""What a review approves and who may decide: pure functions, tested with tables.

A review approves one exact content, kept as its *snapshot* (the text the reviewer reads) and
named by a fingerprint (SHA-256 of its fields as JSON): a post's title, slug and body; a
revision's title and body; a release's items, each the post, its change and the exact text
the change puts live (or, for a takedown, takes down). Approval of one content says nothing
of any other, so a change after the approval needs a review again, whoever made it, and
what goes live must have the fingerprint of an approved snapshot at the moment it goes live.
"""

import hashlib
import json
from collections.abc import Iterable


def _digest(value) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def post_fingerprint(*, title: str, slug: str, body: str) -> str:
    """Return the fingerprint of a post's content as the public would see it."""
    return _digest(["post", title, slug, body])


def revision_fingerprint(*, post_id: int, title: str, body: str) -> str:
    """Return the fingerprint of a revision's content, for its post."""
    return _digest(["revision", post_id, title, body])


def release_fingerprint(items: Iterable[tuple]) -> str:
    """Return the fingerprint of a release's items: ``(post_id, action, title, slug, body)``
    each (the text the item puts live or takes down), in any order."""
    return _digest(["release", sorted(list(item) for item in items)])


#: The fields of a release item's snapshot, in the order its fingerprint takes them.
RELEASE_ITEM_FIELDS = ("post_id", "action", "title", "slug", "body")


def snapshot_fingerprint(target: str, snapshot: dict, *, post_id: int | None) -> str:
    """Return the fingerprint of a review's ``snapshot`` of ``target`` (post, revision,
    release): the same as the content's own, read from the database when it goes live."""
    if target == "post":
        return post_fingerprint(
            title=snapshot["title"], slug=snapshot["slug"], body=snapshot["body"]
        )
    if target == "revision":
        return revision_fingerprint(post_id=post_id, title=snapshot["title"], body=snapshot["body"])
    return release_fingerprint(
        tuple(item[name] for name in RELEASE_ITEM_FIELDS) for item in snapshot["items"]
    )


def decision_problem(*, may_review: bool, is_submitter: bool, status: str) -> str:
    """Return why a user may not approve or reject a review (empty when they may).

    Nobody reviews their own submission: a second pair of eyes is the point.
    """
    if not may_review:
        return (
            "Deciding reviews needs the “Can approve or reject posts, revisions and releases "
            "for review” permission."
        )
    if status != "pending":
        return "This review was decided already, or replaced by a newer submission."
    if is_submitter:
        return "You submitted this yourself: another reviewer decides it."
    return ""


def unapproved_problem(what: str) -> str:
    """Return the message for ``what`` ("“T”") that has no approval of its content now."""
    return (
        f"{what} has not been approved as it is now: reviews are required on this site. "
        "Submit it for review; once a reviewer approves it, it can be scheduled or published."
    )
