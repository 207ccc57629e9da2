"""System checks: the time-zone middleware is installed, after authentication."""

from django.conf import settings
from django.core import checks

MIDDLEWARE = "editors.middleware.EditorTimeZoneMiddleware"
AUTHENTICATION = "django.contrib.auth.middleware.AuthenticationMiddleware"


def register() -> None:
    checks.register(check_middleware, "editors")


def check_middleware(app_configs=None, **kwargs):
    middleware = list(settings.MIDDLEWARE)
    if MIDDLEWARE not in middleware:
        return [
            checks.Warning(
                f"{MIDDLEWARE} is not in MIDDLEWARE: editors' own time zones are ignored and "
                "everyone sees the site's zone.",
                hint=f"Add {MIDDLEWARE!r} to MIDDLEWARE after {AUTHENTICATION!r}.",
                id="editors.W001",
            )
        ]
    if AUTHENTICATION not in middleware or middleware.index(AUTHENTICATION) > middleware.index(
        MIDDLEWARE
    ):
        return [
            checks.Error(
                f"{MIDDLEWARE} needs the signed-in user, so it must come after "
                f"{AUTHENTICATION} in MIDDLEWARE.",
                hint=f"Move {MIDDLEWARE!r} below {AUTHENTICATION!r}.",
                id="editors.E001",
            )
        ]
    return []
