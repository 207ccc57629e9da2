"""Liveness, readiness and scheduler health endpoints for load balancers and health checks.

- ``/healthz``: the process answers (touches nothing else);
- ``/readyz``: the database answers and every migration is applied;
- ``/healthz/scheduler``: the cluster's scheduling works: some node heartbeated within the lease
  and nothing due is late beyond ``INSTATIC_HEALTH_LATE_THRESHOLD`` seconds.

Every time comparison uses the database clock, never this server's.
"""

from datetime import timedelta

from django.apps import apps
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.cache import never_cache

from coordination.clock import database_now
from coordination.conf import settings as coordination_settings
from coordination.models import JobState, Node
from coordination.selectors import live_nodes_q

DEFAULT_LATE_THRESHOLD = 60.0
MAX_LISTED = 10


@never_cache
def healthz(request):
    """Answer as long as the process serves requests; touches nothing else."""
    return JsonResponse({"status": "ok"})


@never_cache
def readyz(request):
    """Return 200 when the database answers and every migration is applied, else 503 with why."""
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        connection.ensure_connection()
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:
        return JsonResponse({"status": "unavailable", "reason": f"database: {exc}"}, status=503)
    if pending:
        names = [f"{m.app_label}.{m.name}" for m, _ in pending]
        return JsonResponse(
            {"status": "unavailable", "reason": "migrations not applied", "pending": names},
            status=503,
        )
    return JsonResponse({"status": "ok"})


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
    live = Node.objects.filter(live_nodes_q(now)).count()
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
    """Return 200 when scheduled work is being done, else 503 with a JSON reason."""
    try:
        healthy, details = scheduler_status()
    except (DatabaseError, InterfaceError) as exc:
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return JsonResponse({"status": "unavailable", "reason": f"database: {text}"}, status=503)
    return JsonResponse(details, status=200 if healthy else 503)
