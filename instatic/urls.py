"""Top-level URL configuration: the admin, health endpoints and the public site."""

from django.contrib import admin
from django.urls import include, path

from coordination.metrics import metrics_view
from instatic import health

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("healthz/scheduler", health.scheduler_health, name="healthz-scheduler"),
    path("metrics", metrics_view, name="metrics"),
    path("", include("publishing.urls")),
]
