"""Liveness, readiness and scheduler health endpoints for load balancers and health checks.

- ``/healthz``: the process answers (touches nothing else);
- ``/readyz``: the database answers and every migration is applied;
- ``/healthz/scheduler``: the cluster's scheduling works: some node heartbeated within the lease
  and nothing due is late beyond ``INSTATIC_HEALTH_LATE_THRESHOLD`` seconds.

Every time comparison uses the database clock, never this server's.

The status code is for everyone (load balancers, container health checks); the reason is not.
Anonymous answers carry ``{"status": ...}`` only: the reasons name late posts (whose slugs are
not public yet), job names and the database's host and port. A staff login or
``Authorization: Bearer <INSTATIC_HEALTH_TOKEN>`` shows them; the reason of an unavailable
database is also logged, so operators find it without either. See docs/ha.md.
"""

import logging
from datetime import timedelta

from django.apps import apps
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.cache import never_cache

from coordination.access import health_token, staff_or_bearer
from coordination.clock import database_now
from coordination.conf import settings as coordination_settings
from coordination.models import JobState, Node
from coordination.selectors import live_schedulers_q

logger = logging.getLogger(__name__)

DEFAULT_LATE_THRESHOLD = 60.0
MAX_LISTED = 10


@never_cache
def healthz(request):
    """Answer as long as the process serves requests; touches nothing else."""
    return JsonResponse({"status": "ok"})


def answer(request, healthy: bool, details: dict) -> JsonResponse:
    """Return 200/503 with ``details`` for staff or the health token, else the status only."""
    if not staff_or_bearer(request, health_token()):
        details = {"status": details["status"]}
    return JsonResponse(details, status=200 if healthy else 503)


def first_line(exc: BaseException) -> str:
    """Return the first line of ``exc``'s message (drivers add hints on further lines)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


@never_cache
def readyz(request):
    """Return 200 when the database answers and every migration is applied, else 503."""
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        connection.ensure_connection()
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:
        reason = f"database: {first_line(exc)}"
        logger.warning("readyz: not ready: %s", reason)
        return answer(request, False, {"status": "unavailable", "reason": reason})
    if pending:
        names = [f"{m.app_label}.{m.name}" for m, _ in pending]
        details = {"status": "unavailable", "reason": "migrations not applied", "pending": names}
        return answer(request, False, details)
    return answer(request, True, {"status": "ok"})


def late_threshold() -> float:
    """Return ``INSTATIC_HEALTH_LATE_THRESHOLD`` (seconds a due job or post may wait)."""
    return float(getattr(settings, "INSTATIC_HEALTH_LATE_THRESHOLD", DEFAULT_LATE_THRESHOLD))


def late_jobs(cutoff) -> list[str]:
    """Return the names of active jobs whose next slot is older than ``cutoff``."""
    return list(
        JobState.objects.filter(next_due__lt=cutoff, paused=False, retired_at__isnull=True)
        .order_by("next_due")
        .values_list("name", flat=True)[:MAX_LISTED]
    )


def late_posts(cutoff) -> list[str] | None:
    """Return slugs of scheduled posts due before ``cutoff`` that did not fail; ``None``
    when the publishing app is not installed (``coordination`` never imports it)."""
    if not apps.is_installed("publishing"):
        return None
    post_model = apps.get_model("publishing", "Post")
    return list(
        post_model.objects.filter(status="scheduled", publish_at__lt=cutoff, last_error="")
        .order_by("publish_at")
        .values_list("slug", flat=True)[:MAX_LISTED]
    )


def scheduler_status() -> tuple[bool, dict]:
    """Return (healthy, details): a live node exists and nothing due is late."""
    now = database_now()
    lease = float(coordination_settings.LEASE)
    threshold = late_threshold()
    live = Node.objects.filter(live_schedulers_q(now)).count()
    details = {"now": now.isoformat(), "live_nodes": live, "late_threshold": threshold}
    if not live:
        return False, {
            **details,
            "status": "unavailable",
            "reason": f"no scheduler node heartbeated within the lease ({lease:g}s)",
        }
    cutoff = now - timedelta(seconds=threshold)
    jobs = late_jobs(cutoff)
    if jobs:
        return False, {
            **details,
            "status": "unavailable",
            "reason": f"job(s) late by more than {threshold:g}s: {', '.join(jobs)}",
            "late_jobs": jobs,
        }
    posts = late_posts(cutoff)
    if posts:
        return False, {
            **details,
            "status": "unavailable",
            "reason": f"scheduled post(s) late by more than {threshold:g}s: {', '.join(posts)}",
            "late_posts": posts,
        }
    return True, {**details, "status": "ok"}


@never_cache
def scheduler_health(request):
    """Return 200 when scheduled work is being done, else 503 (the reason for staff/token)."""
    try:
        healthy, details = scheduler_status()
    except (DatabaseError, InterfaceError) as exc:
        reason = f"database: {first_line(exc)}"
        logger.warning("healthz/scheduler: unavailable: %s", reason)
        return answer(request, False, {"status": "unavailable", "reason": reason})
    return answer(request, healthy, details)
