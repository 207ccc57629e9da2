"""Admin widgets: the "no scheduler is running" banner, the lineup of scheduled posts, and
whether the editor may see the site at a moment (for the links to it).

Template tags rather than a context processor, so that project settings need not know about
this app: the project's admin ``base_site.html`` puts the banner on every admin page, and its
``index.html`` and the post list show the lineup.
"""

from django import template
from django.utils import timezone

from coordination.selectors import any_live_node
from publishing import previews, selectors

register = template.Library()

#: Failed posts counted at most for the banner; past it the banner says "more than".
FAILED_COUNT_CAP = 1000


def _can_see_posts(context) -> bool:
    request = context.get("request")
    user = getattr(request, "user", None)
    return bool(user and user.is_active and user.is_staff and user.has_module_perms("publishing"))


@register.inclusion_tag("admin/publishing/scheduler_banner.html", takes_context=True)
def scheduler_banner(context) -> dict:
    """Warn when no scheduler node has heartbeated within the lease, and count failed posts."""
    if not _can_see_posts(context):
        return {"show": False}
    failed = selectors.failed_posts()[: FAILED_COUNT_CAP + 1].count()
    return {
        "show": True,
        # Only a superuser is told the operator's command; an editor is told whom to tell.
        "operator": context["request"].user.is_superuser,
        "scheduler_alive": any_live_node(),
        # Counted up to a cap: with 100,000 posts scheduled, an exact count reads them all.
        "failed_count": min(failed, FAILED_COUNT_CAP),
        "failed_more": failed > FAILED_COUNT_CAP,
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


@register.simple_tag(takes_context=True)
def may_see_site_at(context) -> bool:
    """Whether the signed-in editor may see the site at a moment (those who may preview
    posts): the post list and the calendar offer "See the site at…" only to them."""
    request = context.get("request")
    return bool(request and previews.can_preview(request.user))
