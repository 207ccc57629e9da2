"""Who may read the metrics and the health details: a staff login or a bearer token.

The web's ``/metrics`` needs a staff login or ``Authorization: Bearer <INSTATIC_METRICS_TOKEN>``
(node names and backlog sizes are not for the public). The scheduler's metrics server is kept
internal by its bind address, and needs the same token when one is set; the health endpoints
answer their status to anyone but show the reason only to staff or with
``Authorization: Bearer <INSTATIC_HEALTH_TOKEN>``. See docs/ha.md.
"""

import hmac

from django.conf import settings as django_settings


def health_token() -> str:
    """Return ``INSTATIC_HEALTH_TOKEN``: the bearer token that shows health details."""
    return getattr(django_settings, "INSTATIC_HEALTH_TOKEN", "") or ""


def metrics_token() -> str:
    """Return ``INSTATIC_METRICS_TOKEN``: the bearer token that reads the metrics."""
    return getattr(django_settings, "INSTATIC_METRICS_TOKEN", "") or ""


def bearer_matches(authorization: str | None, token: str) -> bool:
    """Return True when ``authorization`` is ``Bearer <token>`` and a token is configured.

    An unset token matches nothing, not even an empty bearer value; the comparison takes the
    same time however much of the value is right, so the token cannot be guessed piecewise.
    """
    if not token or not authorization:
        return False
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())


def staff_or_bearer(request, token: str) -> bool:
    """Return True for an active staff user's request or one carrying the bearer ``token``.

    The token is looked at first: a load balancer's probe has no session, so it costs no query.
    """
    if bearer_matches(request.headers.get("Authorization"), token):
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_active and user.is_staff)
