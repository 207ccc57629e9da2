"""Emails about reviews: reviewers hear of a submission, the submitter of the decision.

Sent after the commit that made the change (at most once: a process that dies between the
commit and the send tells nobody; the review list and the post's history still show it),
each in the recipient's own time zone.
"""

import logging

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.mail import send_mail
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from coordination.wording import local_time
from publishing.emails import absolute, zone_of
from reviews.models import Review

logger = logging.getLogger(__name__)


def reviewers():
    """Return the active users who may decide reviews and can be emailed."""
    perm = Permission.objects.filter(content_type__app_label="publishing", codename="review_post")
    return (
        get_user_model()
        .objects.filter(
            Q(is_superuser=True) | Q(user_permissions__in=perm) | Q(groups__permissions__in=perm),
            is_active=True,
        )
        .exclude(email="")
        .distinct()
    )


def _send(user, subject: str, lines: list[str]) -> bool:
    try:
        send_mail(subject, "\n\n".join(lines) + "\n", None, [user.email])
    except Exception:
        logger.exception("could not email %s about a review", user)
        return False
    return True


def tell_reviewers(review_id: int) -> int:
    """Email every reviewer but the submitter that ``review_id`` waits for them."""
    review = Review.objects.select_related("submitted_by").filter(pk=review_id).first()
    if review is None or review.status != Review.Status.PENDING:
        return 0
    url = absolute(reverse("admin:reviews_review_change", args=[review.pk]))
    who = review.submitted_by.get_username() if review.submitted_by else _("someone")
    sent = 0
    for user in reviewers().exclude(pk=review.submitted_by_id):
        with timezone.override(zone_of(user)):
            asks = (
                _("%(what)s needs a review again (since %(when)s): %(reason)s.")
                if review.reason
                else _("%(who)s asks you to review %(what)s (submitted at %(when)s).")
            )
            lines = [
                asks
                % {
                    "who": who,
                    "what": review,
                    "when": local_time(review.submitted_at),
                    "reason": review.reason,
                },
                *([_("Their note: %(note)s") % {"note": review.note}] if review.note else []),
                _("Approve or reject it: %(url)s") % {"url": url},
            ]
        sent += _send(user, _("Review wanted: %(what)s") % {"what": review}, lines)
    return sent


def tell_submitter(review_id: int) -> bool:
    """Email the submitter of ``review_id`` what the reviewer decided, and why."""
    review = (
        Review.objects.select_related("submitted_by", "decided_by").filter(pk=review_id).first()
    )
    user = review.submitted_by if review else None
    if user is None or not user.is_active or not user.email:
        return False
    approved = review.status == Review.Status.APPROVED
    who = review.decided_by.get_username() if review.decided_by else _("a reviewer")
    with timezone.override(zone_of(user)):
        lines = [
            (
                _("%(who)s approved %(what)s at %(when)s: it can be scheduled or published now.")
                if approved
                else _("%(who)s rejected %(what)s at %(when)s.")
            )
            % {"who": who, "what": review, "when": local_time(review.decided_at)},
            *([_("Their comment: %(c)s") % {"c": review.comment}] if review.comment else []),
            _("See it: %(url)s")
            % {"url": absolute(reverse("admin:reviews_review_change", args=[review.pk]))},
        ]
    subject = _("Approved: %(what)s") if approved else _("Rejected: %(what)s")
    return _send(user, subject % {"what": review}, lines)
