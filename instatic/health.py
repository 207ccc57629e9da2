"""Liveness and readiness endpoints for load balancers and container health checks."""

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.cache import never_cache


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
