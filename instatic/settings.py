"""Instatic settings, read from the environment in this one module.

Every environment variable Instatic understands is read here and documented in the README's
configuration table. Production mode (``DJANGO_DEBUG`` off, the default) refuses to start
without ``DJANGO_SECRET_KEY`` so a deployment can never run with a guessable key.
"""

import os
from pathlib import Path

from instatic.database_url import parse_database_url
from instatic.environment import (
    parse_address,
    parse_admins,
    parse_bool,
    parse_choice,
    parse_hosts,
    parse_int,
    parse_lock_keys,
    parse_log_format,
    parse_log_level,
    parse_optional_path,
    parse_origins,
    parse_path,
    parse_port,
    parse_proxy_ssl_header,
    parse_seconds,
    parse_secret_key,
    parse_text,
    parse_time_zone,
    parse_token,
    parse_url,
)
from instatic.media_storage import image_storage
from instatic.pooling import POOLERS, database_behind_pooler, default_pooler

BASE_DIR = Path(__file__).resolve().parent.parent


def _env(parse, name: str, *args, **kwargs):
    """Return ``parse(name, <its value or None>, ...)``: every variable is read through here."""
    return parse(name, os.environ.get(name), *args, **kwargs)


VAR_DIR = _env(parse_path, "INSTATIC_VAR_DIR", BASE_DIR / "var")

DEBUG = _env(parse_bool, "DJANGO_DEBUG", False)
SECRET_KEY = _env(
    parse_secret_key,
    "DJANGO_SECRET_KEY",
    debug=DEBUG,
    development_key="instatic-insecure-development-key-only-used-when-DJANGO_DEBUG-is-on",
)
ALLOWED_HOSTS = _env(parse_hosts, "DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = _env(parse_origins, "DJANGO_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.sitemaps",
    # Django's tasks interface and its database backend: runs of jobs declared
    # run_on="workers" are queued here, in the same transaction as their ledger rows.
    "django_tasks",
    "django_tasks_db",
    "coordination",
    "publishing",
    "reviews",
    "releases",
    "plugins",
    "editors",
    "outbox",
    "media",
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
    "default": _env(
        parse_database_url, "DATABASE_URL", default_sqlite_path=VAR_DIR / "instatic.sqlite3"
    )
}
# Web requests reuse their thread's connection for this long instead of connecting per request,
# and check it before reuse (a restarted server costs one check, not a failed request). Only
# request handling looks at these: the scheduler's lock and job-thread connections are managed
# by coordination (dedicated connections, kept between runs) and are unaffected.
DATABASES["default"]["CONN_MAX_AGE"] = _env(parse_int, "INSTATIC_CONN_MAX_AGE", 60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
# A time Django shows by itself (a read-only field) reads as the admin's do: 24-hour, zoned.
FORMAT_MODULE_PATH = ["instatic.formats"]
# Storage is always UTC; INSTATIC_TIME_ZONE is what editors see in the admin unless they
# chose their own zone (editors.EditorProfile), and what the public site shows.
USE_TZ = True
TIME_ZONE = _env(parse_time_zone, "INSTATIC_TIME_ZONE", "UTC")
USE_I18N = True

STATIC_URL = "static/"
STATIC_ROOT = _env(parse_path, "INSTATIC_STATIC_ROOT", BASE_DIR / "staticfiles")
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


# Uploaded images (the media app, docs/media.md): files under INSTATIC_MEDIA_ROOT through
# Django's default storage, or in an S3-compatible bucket through django-storages when
# INSTATIC_MEDIA_S3_BUCKET is set (credentials from boto3's own AWS_* variables or role).
# Images are served by the media app's view, which applies the embargo; never by MEDIA_URL.
MEDIA_ROOT = _env(parse_path, "INSTATIC_MEDIA_ROOT", VAR_DIR / "media")
INSTATIC_MEDIA_S3_BUCKET = _env(parse_text, "INSTATIC_MEDIA_S3_BUCKET", "")
INSTATIC_MEDIA_S3_ENDPOINT = _env(parse_url, "INSTATIC_MEDIA_S3_ENDPOINT")
if _bucket_storage := image_storage(INSTATIC_MEDIA_S3_BUCKET, INSTATIC_MEDIA_S3_ENDPOINT):
    STORAGES["default"] = _bucket_storage
INSTATIC_MEDIA_MAX_BYTES = _env(parse_int, "INSTATIC_MEDIA_MAX_BYTES", 20 * 1024 * 1024, minimum=1)
INSTATIC_MEDIA_MAX_PIXELS = _env(parse_int, "INSTATIC_MEDIA_MAX_PIXELS", 50_000_000, minimum=1)
INSTATIC_MEDIA_MAX_WIDTH = _env(parse_int, "INSTATIC_MEDIA_MAX_WIDTH", 2560, minimum=16)
INSTATIC_MEDIA_PUBLIC_MAX_AGE = _env(parse_int, "INSTATIC_MEDIA_PUBLIC_MAX_AGE", 60)


SECURE_PROXY_SSL_HEADER = _env(parse_proxy_ssl_header, "DJANGO_SECURE_PROXY_SSL_HEADER")

# Production hardening; DJANGO_DEBUG=1 relaxes it for local development.
if not DEBUG:
    SECURE_SSL_REDIRECT = _env(parse_bool, "DJANGO_SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = _env(parse_int, "DJANGO_SECURE_HSTS_SECONDS", 31536000)
    # Both reach beyond this site (every subdomain; browsers' built-in lists, slow to leave),
    # so the operator opts in.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = _env(
        parse_bool, "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False
    )
    SECURE_HSTS_PRELOAD = _env(parse_bool, "DJANGO_SECURE_HSTS_PRELOAD", False)
    SECURE_CONTENT_TYPE_NOSNIFF = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^healthz/scheduler$", r"^metrics$"]
X_FRAME_OPTIONS = "DENY"


# Health details (/readyz, /healthz/scheduler, the scheduler's /healthz) and metrics (/metrics)
# are for staff or for a request with "Authorization: Bearer <token>" (docs/ha.md).
INSTATIC_HEALTH_TOKEN = _env(parse_token, "INSTATIC_HEALTH_TOKEN")
INSTATIC_METRICS_TOKEN = _env(parse_token, "INSTATIC_METRICS_TOKEN")

# --- Scheduler (coordination app). Read lazily through coordination.conf.settings. ---
INSTATIC_NODE_NAME = _env(parse_text, "INSTATIC_NODE_NAME", "")
INSTATIC_HEARTBEAT_INTERVAL = _env(parse_seconds, "INSTATIC_HEARTBEAT_INTERVAL", 2.0)
INSTATIC_LEASE = _env(parse_seconds, "INSTATIC_LEASE", 10.0)
# Without wake-ups (SQLite, PgBouncer) a leader polls this often, so "run now" and newly
# scheduled posts are picked up within about a second. PostgreSQL (NOTIFY) and MySQL (wake-up
# counters read by the heartbeat) wake their leaders, which sleep up to INSTATIC_NOTIFY_MAX_TICK.
INSTATIC_MAX_TICK = _env(parse_seconds, "INSTATIC_MAX_TICK", 1.0)
INSTATIC_NOTIFY_MAX_TICK = _env(parse_seconds, "INSTATIC_NOTIFY_MAX_TICK", 30.0)
INSTATIC_SHUTDOWN_GRACE = _env(parse_seconds, "INSTATIC_SHUTDOWN_GRACE", 25.0)
# /healthz/scheduler reports 503 when a due job or post waits longer than this (seconds).
INSTATIC_HEALTH_LATE_THRESHOLD = _env(parse_seconds, "INSTATIC_HEALTH_LATE_THRESHOLD", 60.0)
# "transaction" when DATABASE_URL goes through PgBouncer in transaction pooling mode.
INSTATIC_LOCK_MODE = _env(parse_choice, "INSTATIC_LOCK_MODE", "session", ("session", "transaction"))
# "pgbouncer-transaction" when this process (web or scheduler) reaches PostgreSQL through
# PgBouncer in transaction pooling mode; lease mode implies it (instatic/pooling.py).
INSTATIC_DB_POOLER = _env(
    parse_choice, "INSTATIC_DB_POOLER", default_pooler(INSTATIC_LOCK_MODE), POOLERS
)
DATABASES["default"] = database_behind_pooler(DATABASES["default"], INSTATIC_DB_POOLER)
# Worker processes beside each runscheduler (0: a scheduler-only node) and where plugin jobs run
# unless they say (docs/ha.md, "Workers").
INSTATIC_WORKERS = _env(parse_int, "INSTATIC_WORKERS", 2, minimum=0)
# How much lower the worker processes' CPU priority is than their node's (a nice value, 0-19):
# on a machine the scheduler shares with busy workers, its loops go first.
INSTATIC_WORKER_NICE = _env(parse_int, "INSTATIC_WORKER_NICE", 0, minimum=0, maximum=19)
INSTATIC_PLUGIN_JOBS_RUN_ON = _env(
    parse_choice, "INSTATIC_PLUGIN_JOBS_RUN_ON", "leader", ("leader", "workers")
)
# How often an idle worker looks for queued runs where the database cannot wake it (SQLite,
# MariaDB); on PostgreSQL a NOTIFY wakes it and this is only the safety net's floor.
INSTATIC_WORKER_POLL = _env(parse_seconds, "INSTATIC_WORKER_POLL", 1.0, positive=True)
# Runs one worker process executes at once on its threads (1 on SQLite): sized for I/O-bound
# plugin jobs; CPU-bound jobs scale with processes (INSTATIC_WORKERS) instead.
INSTATIC_WORKER_THREADS = _env(parse_int, "INSTATIC_WORKER_THREADS", 8, minimum=1)
# Seconds a run on a worker may go on past its max_duration before its pool kills the process.
INSTATIC_WORKER_KILL_GRACE = _env(parse_seconds, "INSTATIC_WORKER_KILL_GRACE", 10.0)
# Runs travel on their own queue, "instatic-runs"; a TASKS of your own must accept it.
TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": ["default", "instatic-runs"],
    }
}
INSTATIC_MISFIRE_GRACE = _env(parse_seconds, "INSTATIC_MISFIRE_GRACE", 30.0)
INSTATIC_FAILURE_PAUSE_THRESHOLD = _env(parse_int, "INSTATIC_FAILURE_PAUSE_THRESHOLD", 5)
INSTATIC_RUN_RETENTION = _env(parse_int, "INSTATIC_RUN_RETENTION", 200, minimum=1)
# How long one attempt to become leader blocks in the database before the loop looks around.
INSTATIC_LOCK_WAIT = _env(parse_seconds, "INSTATIC_LOCK_WAIT", 30.0, positive=True)
# Explicit lock keys per group ("reports=0x1234,imports=42"); others are hashed from the name.
INSTATIC_LOCK_KEYS = _env(parse_lock_keys, "INSTATIC_LOCK_KEYS")
# The longest wait between reconnection attempts while the database is away.
INSTATIC_DB_RETRY_MAX = _env(parse_seconds, "INSTATIC_DB_RETRY_MAX", 5.0, positive=True)
INSTATIC_STARTUP_DB_WAIT = _env(parse_seconds, "INSTATIC_STARTUP_DB_WAIT", 60.0)
INSTATIC_ALERT_INTERVAL = _env(parse_seconds, "INSTATIC_ALERT_INTERVAL", 3600.0, positive=True)
INSTATIC_ALERT_AFTER_FAILURES = _env(parse_int, "INSTATIC_ALERT_AFTER_FAILURES", 3)

# Who gets alerts (mail_admins) and how mail goes out. DJANGO_ADMINS is a comma-separated list
# of addresses, e.g. "Ops <ops@example.com>, ann@example.com"; unset sends no mail.
ADMINS = _env(parse_admins, "DJANGO_ADMINS")
SERVER_EMAIL = _env(parse_address, "DJANGO_SERVER_EMAIL", "instatic@localhost")
EMAIL_SUBJECT_PREFIX = "[Instatic] "
EMAIL_HOST = _env(parse_text, "DJANGO_EMAIL_HOST", "localhost")
EMAIL_PORT = _env(parse_port, "DJANGO_EMAIL_PORT", 25)
EMAIL_HOST_USER = _env(parse_text, "DJANGO_EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = _env(parse_text, "DJANGO_EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env(parse_bool, "DJANGO_EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = 10
# Where authors' notifications come from, and how mail leaves: "smtp" (the EMAIL_HOST above),
# or in development "console" (printed by the process that sends it) or "file" (one file per
# email under $INSTATIC_VAR_DIR/mail). With DJANGO_DEBUG on, "console" unless set.
DEFAULT_FROM_EMAIL = _env(parse_address, "DJANGO_DEFAULT_FROM_EMAIL", SERVER_EMAIL)
EMAIL_BACKEND = {
    "smtp": "django.core.mail.backends.smtp.EmailBackend",
    "console": "django.core.mail.backends.console.EmailBackend",
    "file": "django.core.mail.backends.filebased.EmailBackend",
}[
    _env(
        parse_choice,
        "DJANGO_EMAIL_BACKEND",
        "console" if DEBUG else "smtp",
        ("smtp", "console", "file"),
    )
]
EMAIL_FILE_PATH = VAR_DIR / "mail"
# The site's address (https://news.example.com), for the links in authors' emails; unset,
# they give the admin's paths only.
INSTATIC_SITE_URL = _env(parse_url, "INSTATIC_SITE_URL")
# The site's name, which the admin's header and page titles show.
INSTATIC_SITE_NAME = _env(parse_text, "INSTATIC_SITE_NAME", "Instatic")
# --- Publishing app (publishing.conf.settings). ---
INSTATIC_PUBLISH_BATCH_SIZE = _env(parse_int, "INSTATIC_PUBLISH_BATCH_SIZE", 2000, minimum=1)
INSTATIC_PUBLISH_BACKLOG_BATCH_SIZE = _env(
    parse_int, "INSTATIC_PUBLISH_BACKLOG_BATCH_SIZE", 10_000, minimum=1
)
INSTATIC_PUBLISH_ON_TIME_WINDOW = _env(parse_int, "INSTATIC_PUBLISH_ON_TIME_WINDOW", 10, minimum=1)
INSTATIC_PUBLISH_LINEUP_SIZE = _env(parse_int, "INSTATIC_PUBLISH_LINEUP_SIZE", 10, minimum=1)
INSTATIC_POSTS_PER_PAGE = _env(parse_int, "INSTATIC_POSTS_PER_PAGE", 10, minimum=1)
INSTATIC_FEED_SIZE = _env(parse_int, "INSTATIC_FEED_SIZE", 20, minimum=1)
INSTATIC_LATE_ALERT_AFTER = _env(parse_seconds, "INSTATIC_LATE_ALERT_AFTER", 300.0, positive=True)
INSTATIC_PUBLISH_CALENDAR_WEEKS = _env(parse_int, "INSTATIC_PUBLISH_CALENDAR_WEEKS", 4, minimum=1)
INSTATIC_PUBLISH_CALENDAR_DAY_LIMIT = _env(
    parse_int, "INSTATIC_PUBLISH_CALENDAR_DAY_LIMIT", 8, minimum=1
)
INSTATIC_POST_BODY_MAX_CHARS = _env(parse_int, "INSTATIC_POST_BODY_MAX_CHARS", 200_000, minimum=1)
# On: nothing goes live before a reviewer approved it (reviews.actions).
INSTATIC_REQUIRE_REVIEW = _env(parse_bool, "INSTATIC_REQUIRE_REVIEW", False)
# --- Plugins app (plugins.conf.settings). ---
INSTATIC_EXPORT_ROOT = _env(parse_optional_path, "INSTATIC_EXPORT_ROOT")
INSTATIC_EXPORT_BASE_URL = _env(parse_url, "INSTATIC_EXPORT_BASE_URL")
INSTATIC_EXPORT_KEEP = _env(parse_int, "INSTATIC_EXPORT_KEEP", 2)
# Off: images in post bodies must come from this site (an image elsewhere is a tracking pixel).
INSTATIC_ALLOW_EXTERNAL_IMAGES = _env(parse_bool, "INSTATIC_ALLOW_EXTERNAL_IMAGES", False)

# --- Outbox (outbox.conf.settings): webhooks. ---
INSTATIC_WEBHOOK_ALLOW_PRIVATE = _env(parse_bool, "INSTATIC_WEBHOOK_ALLOW_PRIVATE", False)
INSTATIC_WEBHOOK_ALLOW_HTTP = _env(parse_bool, "INSTATIC_WEBHOOK_ALLOW_HTTP", False)
INSTATIC_WEBHOOK_RETRY_FOR = _env(
    parse_seconds, "INSTATIC_WEBHOOK_RETRY_FOR", 86_400.0, positive=True
)
INSTATIC_WEBHOOK_RETRY_BACKOFF = _env(
    parse_seconds, "INSTATIC_WEBHOOK_RETRY_BACKOFF", 30.0, positive=True
)
INSTATIC_WEBHOOK_CONNECT_TIMEOUT = _env(
    parse_seconds, "INSTATIC_WEBHOOK_CONNECT_TIMEOUT", 3.0, positive=True
)
INSTATIC_WEBHOOK_READ_TIMEOUT = _env(
    parse_seconds, "INSTATIC_WEBHOOK_READ_TIMEOUT", 10.0, positive=True
)
INSTATIC_WEBHOOK_ATTEMPT_DEADLINE = _env(
    parse_seconds, "INSTATIC_WEBHOOK_ATTEMPT_DEADLINE", 15.0, positive=True
)
INSTATIC_WEBHOOK_LANES = _env(parse_int, "INSTATIC_WEBHOOK_LANES", 32, minimum=1)
INSTATIC_WEBHOOK_LANE_LEASE = _env(
    parse_seconds, "INSTATIC_WEBHOOK_LANE_LEASE", 60.0, positive=True
)
INSTATIC_WEBHOOK_ROTATION_HOURS = _env(parse_int, "INSTATIC_WEBHOOK_ROTATION_HOURS", 24, minimum=0)
INSTATIC_OUTBOX_RETENTION_DAYS = _env(parse_int, "INSTATIC_OUTBOX_RETENTION_DAYS", 30, minimum=1)

LOG_LEVEL = _env(parse_log_level, "INSTATIC_LOG_LEVEL", "INFO")
# "text" (default) for people, "json" for log shippers: one object per line (instatic/logging.py).
LOG_FORMAT = _env(parse_log_format, "INSTATIC_LOG_FORMAT")
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
        "releases": {"level": LOG_LEVEL},
        "reviews": {"level": LOG_LEVEL},
        "plugins": {"level": LOG_LEVEL},
        "outbox": {"level": LOG_LEVEL},
        "media": {"level": LOG_LEVEL},
        "editors": {"level": LOG_LEVEL},
        "instatic": {"level": LOG_LEVEL},
        "django": {"level": "WARNING"},
    },
}
