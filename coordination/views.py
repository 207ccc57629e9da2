"""The web process's ``/metrics``: the registry's metrics for staff or the metrics token."""

from django.http import HttpResponse
from django.views.decorators.cache import never_cache

from coordination.access import metrics_token, staff_or_bearer
from coordination.metrics import METRICS


def unauthorized(what: str, variable: str) -> HttpResponse:
    """Return the 401 for a request that may not read ``what``."""
    response = HttpResponse(
        f"{what} need a staff login or Authorization: Bearer <{variable}>.\n",
        status=401,
        content_type="text/plain; charset=utf-8",
    )
    response["WWW-Authenticate"] = 'Bearer realm="instatic"'
    return response


@never_cache
def metrics_view(request):
    """Serve the metrics to Prometheus from the web process (``/metrics``): staff or token."""
    if not staff_or_bearer(request, metrics_token()):
        return unauthorized("metrics", "INSTATIC_METRICS_TOKEN")
    body, content_type = METRICS.render(request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)
