"""Top-level URL configuration: the admin, health endpoints, images and the public site (and
the optional apps' pages, when they are installed)."""

from django.apps import apps
from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from django.utils.functional import lazy

from coordination.views import metrics_view
from editors.views import my_notifications, my_time_zone
from instatic import health
from instatic.view_on_site import view_on_site
from publishing.live_preview import live_preview

# The admin's header and page titles name the site (INSTATIC_SITE_NAME), read when shown.
admin.site.site_header = admin.site.site_title = lazy(lambda: settings.INSTATIC_SITE_NAME, str)()


def optional_pages() -> list:
    """The admin pages of the optional apps installed (the outbox's "watch this post")."""
    if not apps.is_installed("outbox"):
        return []
    from outbox.watching import watch_post

    return [
        path("admin/watch/<int:post_id>/", admin.site.admin_view(watch_post), name="watch_post")
    ]


urlpatterns = [
    # Ahead of the admin's own "view on site" URL, which checks no permission.
    path(
        "admin/r/<int:content_type_id>/<path:object_id>/",
        admin.site.admin_view(view_on_site),
    ),
    path("admin/my-time-zone/", admin.site.admin_view(my_time_zone), name="my_time_zone"),
    path(
        "admin/my-notifications/",
        admin.site.admin_view(my_notifications),
        name="my_notifications",
    ),
    *optional_pages(),
    path(
        "admin/live-preview/",
        admin.site.admin_view(live_preview),
        name="publishing_live_preview",
    ),
    # Pages that moved with reviews and releases: old links go on to the new addresses.
    path("", include("instatic.moved_pages")),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("healthz/scheduler", health.scheduler_health, name="healthz-scheduler"),
    path("metrics", metrics_view, name="metrics"),
    path("", include("media.urls")),
    path("", include("publishing.urls")),
]
