"""Instatic settings, read from the environment in this one module.

Every environment variable Instatic understands is read here and documented in the README's
configuration table. Production mode (``DJANGO_DEBUG`` off, the default) refuses to start
without ``DJANGO_SECRET_KEY`` so a deployment can never run with a guessable key.
"""

import math
import os
import re
from email.utils import getaddresses
from pathlib import Path

from instatic.database_url import database_from_url
from instatic.logging import parse_log_format

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("INSTATIC_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise SystemExit(f"{name}={value!r} is not a boolean; use 1/0, true/false, yes/no or on/off.")


def _env_float(name: str, default: float, *, positive: bool = False) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise SystemExit(f"{name}={value!r} is not a number of seconds.") from None
    if not math.isfinite(number) or (positive and number <= 0):
        raise SystemExit(f"{name}={value!r}: use a number of seconds above 0.")
    return number


def _env_int(name: str, default: int, *, minimum: int = 0) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise SystemExit(f"{name}={value!r} is not a whole number.") from None
    if number < minimum:
        raise SystemExit(f"{name}={value!r}: use a whole number of at least {minimum}.")
    return number


def _env_lock_keys(name: str) -> dict[str, int]:
    """Return ``group=key,group=key`` as a dict; keys are integers (decimal or 0x hex)."""
    keys: dict[str, int] = {}
    value = os.environ.get(name, "")
    for item in filter(None, (part.strip() for part in value.split(","))):
        group, _, key = (part.strip() for part in item.partition("="))
        try:
            number = int(key, 0)
        except ValueError:
            number = None
        if not group or number is None or not -(2**63) <= number <= 2**64 - 1 or group in keys:
            raise SystemExit(
                f"{name}={value!r}: give each group one 64-bit integer key, e.g. "
                f"{name}=reports=0x1234,imports=42 ({item!r} is not one)."
            )
        keys[group] = number
    return keys


DEBUG = _env_bool("DJANGO_DEBUG", False)

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise SystemExit(
            "DJANGO_SECRET_KEY is not set. Production mode (DJANGO_DEBUG off) needs a long random "
            "secret, e.g. export DJANGO_SECRET_KEY=$(python -c 'import secrets; "
            "print(secrets.token_urlsafe(50))'), "
            "or set DJANGO_DEBUG=1 for local development."
        )
    SECRET_KEY = "instatic-insecure-development-key-only-used-when-DJANGO_DEBUG-is-on"
elif not DEBUG and (len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5):
    # Django's own deploy check (security.W009) only warns; a guessable key signs sessions.
    raise SystemExit(
        f"DJANGO_SECRET_KEY is too weak ({len(SECRET_KEY)} characters, "
        f"{len(set(SECRET_KEY))} different); production needs at least 50 random characters, "
        "e.g. export DJANGO_SECRET_KEY=$(python -c 'import secrets; "
        "print(secrets.token_urlsafe(50))')."
    )

ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.sitemaps",
    "coordination",
    "publishing",
    "plugins",
    "editors",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Each editor's own time zone for their admin requests (after authentication: editors.E001).
    "editors.middleware.EditorTimeZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "instatic.urls"
TEST_RUNNER = "instatic.test_runner.PytestRunner"
WSGI_APPLICATION = "instatic.wsgi.application"
ASGI_APPLICATION = "instatic.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(
        os.environ.get("DATABASE_URL"), default_sqlite_path=VAR_DIR / "instatic.sqlite3"
    )
}
# Web requests reuse their thread's connection for this long instead of connecting per request,
# and check it before reuse (a restarted server costs one check, not a failed request). Only
# request handling looks at these: the scheduler's lock and job-thread connections are managed
# by coordination (dedicated connections, kept between runs) and are unaffected.
DATABASES["default"]["CONN_MAX_AGE"] = _env_int("INSTATIC_CONN_MAX_AGE", 60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
# Storage is always UTC; INSTATIC_TIME_ZONE is what editors see in the admin unless they
# chose their own zone (editors.EditorProfile), and what the public site shows.
USE_TZ = True
TIME_ZONE = os.environ.get("INSTATIC_TIME_ZONE", "UTC")
USE_I18N = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("INSTATIC_STATIC_ROOT", BASE_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}


def _env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """Return ``SECURE_PROXY_SSL_HEADER`` from ``Header`` or ``Header=value`` (None: unset).

    Only a proxy that always sets (or strips) the header makes it trustworthy: otherwise any
    client can claim HTTPS by sending it, so nothing is trusted unless the operator says so.
    """
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    header, equals, expected = (part.strip() for part in value.partition("="))
    if not equals:
        expected = "https"
    if not re.fullmatch(r"[A-Za-z0-9-]+", header) or not expected:
        raise SystemExit(
            f"{name}={value!r} is not a header; name the header your proxy sets on HTTPS "
            f"requests, e.g. {name}=X-Forwarded-Proto (or X-Forwarded-Proto=https), "
            "or unset it when no proxy sets one."
        )
    return ("HTTP_" + header.upper().replace("-", "_"), expected)


SECURE_PROXY_SSL_HEADER = _env_proxy_ssl_header("DJANGO_SECURE_PROXY_SSL_HEADER")

# Production hardening; DJANGO_DEBUG=1 relaxes it for local development.
if not DEBUG:
    SECURE_SSL_REDIRECT = _env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(_env_float("DJANGO_SECURE_HSTS_SECONDS", 31536000))
    # Both reach beyond this site (every subdomain; browsers' built-in lists, slow to leave),
    # so the operator opts in.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = _env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
    SECURE_CONTENT_TYPE_NOSNIFF = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^healthz/scheduler$", r"^metrics$"]
X_FRAME_OPTIONS = "DENY"


def _env_token(name: str) -> str:
    """Return a bearer token from the environment ("" when unset); refuse a guessable one."""
    value = os.environ.get(name, "").strip()
    if value and len(value) < 32:
        raise SystemExit(
            f"{name} is {len(value)} characters long; use at least 32 random characters, e.g. "
            f"export {name}=$(python -c 'import secrets; print(secrets.token_urlsafe(32))'), "
            "or unset it."
        )
    return value


# Health details (/readyz, /healthz/scheduler, the scheduler's /healthz) and metrics (/metrics)
# are for staff or for a request with "Authorization: Bearer <token>" (docs/ha.md).
INSTATIC_HEALTH_TOKEN = _env_token("INSTATIC_HEALTH_TOKEN")
INSTATIC_METRICS_TOKEN = _env_token("INSTATIC_METRICS_TOKEN")

# --- Scheduler (coordination app). Read lazily through coordination.conf.settings. ---
INSTATIC_NODE_NAME = os.environ.get("INSTATIC_NODE_NAME", "")
INSTATIC_HEARTBEAT_INTERVAL = _env_float("INSTATIC_HEARTBEAT_INTERVAL", 2.0)
INSTATIC_LEASE = _env_float("INSTATIC_LEASE", 10.0)
# Without wake-ups (SQLite, PgBouncer) a leader polls this often, so "run now" and newly
# scheduled posts are picked up within about a second. PostgreSQL (NOTIFY) and MySQL (wake-up
# counters read by the heartbeat) wake their leaders, which sleep up to INSTATIC_NOTIFY_MAX_TICK.
INSTATIC_MAX_TICK = _env_float("INSTATIC_MAX_TICK", 1.0)
INSTATIC_NOTIFY_MAX_TICK = _env_float("INSTATIC_NOTIFY_MAX_TICK", 30.0)
INSTATIC_SHUTDOWN_GRACE = _env_float("INSTATIC_SHUTDOWN_GRACE", 25.0)
# /healthz/scheduler reports 503 when a due job or post waits longer than this (seconds).
INSTATIC_HEALTH_LATE_THRESHOLD = _env_float("INSTATIC_HEALTH_LATE_THRESHOLD", 60.0)
# "transaction" when DATABASE_URL goes through PgBouncer in transaction pooling mode.
INSTATIC_LOCK_MODE = os.environ.get("INSTATIC_LOCK_MODE", "session").strip().lower()
if INSTATIC_LOCK_MODE == "transaction":
    # Server-side cursors need a session; a transaction pooler cannot give them one.
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
INSTATIC_MISFIRE_GRACE = _env_float("INSTATIC_MISFIRE_GRACE", 30.0)
INSTATIC_FAILURE_PAUSE_THRESHOLD = _env_int("INSTATIC_FAILURE_PAUSE_THRESHOLD", 5)
INSTATIC_RUN_RETENTION = _env_int("INSTATIC_RUN_RETENTION", 200, minimum=1)
# How long one attempt to become leader blocks in the database before the loop looks around.
INSTATIC_LOCK_WAIT = _env_float("INSTATIC_LOCK_WAIT", 30.0, positive=True)
# Explicit lock keys per group ("reports=0x1234,imports=42"); others are hashed from the name.
INSTATIC_LOCK_KEYS = _env_lock_keys("INSTATIC_LOCK_KEYS")
# The longest wait between reconnection attempts while the database is away.
INSTATIC_DB_RETRY_MAX = _env_float("INSTATIC_DB_RETRY_MAX", 5.0, positive=True)
INSTATIC_STARTUP_DB_WAIT = _env_float("INSTATIC_STARTUP_DB_WAIT", 60.0)
INSTATIC_ALERT_INTERVAL = _env_float("INSTATIC_ALERT_INTERVAL", 3600.0, positive=True)
INSTATIC_ALERT_AFTER_FAILURES = _env_int("INSTATIC_ALERT_AFTER_FAILURES", 3)

# Who gets alerts (mail_admins) and how mail goes out. DJANGO_ADMINS is a comma-separated list
# of addresses, e.g. "Ops <ops@example.com>, ann@example.com"; unset sends no mail.
ADMINS = [
    (name or address, address)
    for name, address in getaddresses([os.environ.get("DJANGO_ADMINS", "")])
    if "@" in address
]
SERVER_EMAIL = os.environ.get("DJANGO_SERVER_EMAIL", "instatic@localhost")
EMAIL_SUBJECT_PREFIX = "[Instatic] "
EMAIL_HOST = os.environ.get("DJANGO_EMAIL_HOST", "localhost")
EMAIL_PORT = _env_int("DJANGO_EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = os.environ.get("DJANGO_EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("DJANGO_EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("DJANGO_EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = 10
# --- Publishing app (publishing.conf.settings). ---
INSTATIC_PUBLISH_BATCH_SIZE = _env_int("INSTATIC_PUBLISH_BATCH_SIZE", 2000, minimum=1)
INSTATIC_PUBLISH_BACKLOG_BATCH_SIZE = _env_int(
    "INSTATIC_PUBLISH_BACKLOG_BATCH_SIZE", 10_000, minimum=1
)
INSTATIC_PUBLISH_ON_TIME_WINDOW = _env_int("INSTATIC_PUBLISH_ON_TIME_WINDOW", 10, minimum=1)
INSTATIC_PUBLISH_LINEUP_SIZE = _env_int("INSTATIC_PUBLISH_LINEUP_SIZE", 10, minimum=1)
INSTATIC_POSTS_PER_PAGE = _env_int("INSTATIC_POSTS_PER_PAGE", 10, minimum=1)
INSTATIC_FEED_SIZE = _env_int("INSTATIC_FEED_SIZE", 20, minimum=1)
INSTATIC_PUBLISH_CALENDAR_WEEKS = _env_int("INSTATIC_PUBLISH_CALENDAR_WEEKS", 4, minimum=1)
INSTATIC_PUBLISH_CALENDAR_DAY_LIMIT = _env_int("INSTATIC_PUBLISH_CALENDAR_DAY_LIMIT", 8, minimum=1)
INSTATIC_POST_BODY_MAX_CHARS = _env_int("INSTATIC_POST_BODY_MAX_CHARS", 200_000, minimum=1)
# --- Plugins app (plugins.conf.settings). ---
INSTATIC_EXPORT_ROOT = os.environ.get("INSTATIC_EXPORT_ROOT", "")
INSTATIC_EXPORT_BASE_URL = os.environ.get("INSTATIC_EXPORT_BASE_URL", "")
INSTATIC_EXPORT_KEEP = _env_int("INSTATIC_EXPORT_KEEP", 2)
# Off: images in post bodies must come from this site (an image elsewhere is a tracking pixel).
INSTATIC_ALLOW_EXTERNAL_IMAGES = _env_bool("INSTATIC_ALLOW_EXTERNAL_IMAGES", False)

LOG_LEVEL = os.environ.get("INSTATIC_LOG_LEVEL", "INFO").upper()
# "text" (default) for people, "json" for log shippers: one object per line (instatic/logging.py).
LOG_FORMAT = parse_log_format(os.environ.get("INSTATIC_LOG_FORMAT"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
        "json": {"()": "instatic.logging.JSONFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT},
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "coordination": {"level": LOG_LEVEL},
        "publishing": {"level": LOG_LEVEL},
        "plugins": {"level": LOG_LEVEL},
        "instatic": {"level": LOG_LEVEL},
        "django": {"level": "WARNING"},
    },
}
