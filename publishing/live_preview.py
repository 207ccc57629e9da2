"""The post page's live preview: a body rendered by the public pages' own renderer and
sanitizer (``publishing.rendering``), for the editor typing it.

The cost is bounded as a save's is: a body over the length limit is not rendered, and the
renderer refuses what would nest or copy without bound (``rendering.check_nesting``). The
page asks at most once per pause in typing, and drops an answer overtaken by a newer one.
"""

from django.core.exceptions import PermissionDenied
from django.http import JsonResponse
from django.views.decorators.http import require_POST

from publishing.conf import settings
from publishing.page_bodies import page_body
from publishing.rendering import RenderError, render_markdown


def may_preview(user) -> bool:
    """Return True if ``user`` may write posts (and so preview what they write)."""
    return bool(
        user.is_active
        and user.is_staff
        and (user.has_perm("publishing.change_post") or user.has_perm("publishing.add_post"))
    )


@require_POST
def live_preview(request):
    """Answer ``{"html": ...}`` for the posted ``body``, or ``{"error": ...}`` saying why not."""
    if not may_preview(request.user):
        raise PermissionDenied
    body = request.POST.get("body", "")
    limit = int(settings.POST_BODY_MAX_CHARS)
    if len(body) > limit:
        return JsonResponse(
            {"error": f"The body is {len(body):,} characters long; the limit is {limit:,}."}
        )
    try:
        rendered = render_markdown(body)
    except RenderError as exc:
        return JsonResponse({"error": f"This body cannot be published: {exc}."})
    return JsonResponse({"html": str(page_body(0, str(rendered)))})
