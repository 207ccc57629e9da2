"""The post page's "Deliveries" section: what became of the post's publish events.

Added to the post's admin page through :mod:`publishing.admin.sections` (publishing does
not know the outbox). It lists the latest deliveries of the post's events, to whom, with
their last webhook attempt, and links to the delivery list, where they can be sent again.
"""

from django.template.loader import render_to_string
from django.urls import reverse

from outbox.admin_words import endpoint_names, subscriber_text
from outbox.models import Delivery, WebhookAttempt

#: How many of a post's latest deliveries the section shows.
SHOWN = 10


def deliveries_section(request, post):
    """Return the section's HTML, or ``None`` for a user who may not see deliveries or a
    post none of whose events were delivered."""
    if not request.user.has_perm("outbox.view_delivery"):
        return None
    deliveries = list(Delivery.objects.filter(post_id=post.pk).order_by("-id")[:SHOWN])
    if not deliveries:
        return None
    last_attempts = {}
    for attempt in WebhookAttempt.objects.filter(delivery__in=deliveries).order_by("at", "id"):
        last_attempts[attempt.delivery_id] = attempt
    names = endpoint_names(d.subscriber for d in deliveries)
    rows = [
        {
            "delivery": d,
            "to": subscriber_text(d.subscriber, names),
            "attempt": last_attempts.get(d.pk),
        }
        for d in deliveries
    ]
    return render_to_string(
        "admin/outbox/post_deliveries.html",
        {
            "rows": rows,
            "all_url": reverse("admin:outbox_delivery_changelist") + f"?post_id={post.pk}",
        },
        request=request,
    )
