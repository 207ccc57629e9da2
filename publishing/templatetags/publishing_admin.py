"""Admin widgets: the "no scheduler is running" banner and the lineup of scheduled posts.

Template tags rather than a context processor, so the admin index and the post list can show
them without project settings knowing about this app.
"""

from django import template
from django.utils import timezone

from coordination.selectors import any_live_node
from publishing import selectors

register = template.Library()


def _can_see_posts(context) -> bool:
    request = context.get("request")
    user = getattr(request, "user", None)
    return bool(user and user.is_active and user.is_staff and user.has_module_perms("publishing"))


@register.inclusion_tag("admin/publishing/scheduler_banner.html", takes_context=True)
def scheduler_banner(context) -> dict:
    """Warn when no scheduler node has heartbeated within the lease, and count failed posts."""
    if not _can_see_posts(context):
        return {"show": False}
    return {
        "show": True,
        "scheduler_alive": any_live_node(),
        "failed_count": selectors.failed_posts().count(),
    }


@register.inclusion_tag("admin/publishing/lineup.html", takes_context=True)
def publishing_lineup(context) -> dict:
    """List the next scheduled posts, soonest first, in the editor's time zone."""
    if not _can_see_posts(context):
        return {"show": False}
    return {
        "show": True,
        "posts": selectors.lineup(),
        "time_zone_name": timezone.get_current_timezone_name(),
    }
