"""Where reviews stop editors: the save rule, the checks before scheduling or publishing, and
what the pages that offer those buttons say first.

Each is one of publishing's extension points (:mod:`publishing.hooks`,
:mod:`publishing.go_live`), registered by :mod:`reviews.wiring`; nothing here acts when
reviews are not required.
"""

from django.utils.translation import gettext as _

from publishing import go_live
from publishing.exceptions import InvalidTransition
from publishing.hooks import Saving
from publishing.models import Post
from reviews import actions
from reviews.models import Review
from reviews.rules import revision_fingerprint, unapproved_problem

S = Post.Status
#: Why a scheduled post went back to draft (its history says it): changed after its approval.
SENT_BACK_NOTE = "changed after it was approved; back to draft until it is approved again"


def save_rule(current: Post, post: Post, *, user=None) -> Saving | None:
    """Say what saving ``post``'s text over ``current`` (locked) means under review.

    What goes live is what a reviewer approved: a scheduled post whose text changes is no
    longer that, so it goes back to draft with a new submission; a live post's text changes
    only through a revision, which is reviewed before it is scheduled. Going back to a text
    that was approved needs nothing.
    """
    if not actions.required():
        return None
    new = actions.fingerprint_of_post(post)
    if new == actions.fingerprint_of_post(current) or actions.is_approved(
        target=Review.Target.POST, fingerprint=new, post=current
    ):
        return None
    if current.status == S.PUBLISHED:
        raise InvalidTransition(
            f"“{current}” is live and reviews are required: change its text through a "
            "revision (Revisions and preview), which a reviewer approves before it goes live."
        )
    if current.status != S.SCHEDULED:
        return None

    def send_back() -> list[str]:
        actions.send_back(current, user=user, reason=SENT_BACK_NOTE)
        return [
            _(
                "Its text changed after it was approved, so it went back to draft and was "
                "submitted for review again: it will not go live until a reviewer approves "
                "it. Then schedule it again."
            )
        ]

    return Saving(back_to_draft=True, after=send_back)


def editor_check(kind: str, post: Post, *, title=None, body=None) -> str:
    """Refuse to schedule or publish content no reviewer approved as it is (a post not saved
    yet has no approval)."""
    if not actions.required():
        return ""
    if kind == go_live.POST:
        approved = post.pk is not None and actions.is_approved(
            target=Review.Target.POST, fingerprint=actions.fingerprint_of_post(post), post=post
        )
        return "" if approved else unapproved_problem(f"“{post}”")
    if kind == go_live.REVISION and title is not None:
        fingerprint = revision_fingerprint(post_id=post.pk, title=title, body=body)
        approved = actions.is_approved(
            target=Review.Target.REVISION, fingerprint=fingerprint, post=post
        )
        return "" if approved else unapproved_problem(f"This revision of “{post}”")
    return ""


def editor_notice(kind: str) -> str:
    """Say, where a post is scheduled or published (or a revision scheduled), that it waits
    for an approval."""
    if not actions.required():
        return ""
    if kind == go_live.POST:
        return _(
            "Schedule and Publish now need approval first: reviews are required on this site, "
            "and this text has not been approved as it is. Submit it for review below."
        )
    if kind == go_live.REVISION:
        return _(
            "Needs approval first: with review on, only a text a reviewer approved as it is "
            "can be scheduled here. Edit the post on its page and submit it for review; once "
            "approved, schedule that text here. Any other text is refused."
        )
    return ""
