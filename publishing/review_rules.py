"""What a review approves and who may decide: pure functions, tested with tables.

A review approves one exact content, named by a fingerprint (SHA-256 of its fields as JSON):
a post's title, slug and body; a revision's title and body; a release's items as pinned
(each post, its change, its pinned version and revision). Approval of one content says
nothing of any other, so a change after the approval needs a review again, whoever made it.
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
    """Return the fingerprint of a release's items: ``(post_id, action, pinned_version,
    revision_id)`` each, in any order."""
    return _digest(["release", sorted(list(item) for item in items)])


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
