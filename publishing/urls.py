"""The public site's URLs (mounted at the site root by ``instatic.urls``)."""

from django.contrib.sitemaps import views as sitemap_views
from django.urls import path
from django.views.decorators.http import conditional_page

from publishing import views
from publishing.feeds import LatestPostsFeed
from publishing.sitemaps import SITEMAPS

app_name = "publishing"
urlpatterns = [
    path("", views.index, name="index"),
    path("posts/<slug:slug>/", views.post_detail, name="post_detail"),
    path("preview/<str:token>/", views.preview, name="preview"),
    path("site-at/<str:token>/", views.site_at_shared, name="site_at_shared"),
    path("site-at/<str:token>/feed/", views.site_at_shared_feed, name="site_at_shared_feed"),
    path(
        "site-at/<str:token>/sitemap.xml",
        views.site_at_shared_sitemap,
        name="site_at_shared_sitemap",
    ),
    path(
        "site-at/<str:token>/sitemap-<section>.xml",
        views.site_at_shared_sitemap,
        name="site_at_shared_sitemap_section",
    ),
    path(
        "site-at/<str:token>/posts/<slug:slug>/",
        views.site_at_shared_post,
        name="site_at_shared_post",
    ),
    # Feed and sitemap get an ETag from their content and answer conditional requests.
    path("feed/", conditional_page(LatestPostsFeed()), name="feed"),
    # The sitemap index lists every page of every section (Django's index + sitemap views):
    # sitemap-posts.xml, sitemap-posts.xml?p=2, ... (publishing/sitemaps.py).
    path(
        "sitemap.xml",
        conditional_page(sitemap_views.index),
        {"sitemaps": SITEMAPS, "sitemap_url_name": "publishing:sitemap_section"},
        name="sitemap",
    ),
    path(
        "sitemap-<section>.xml",
        conditional_page(sitemap_views.sitemap),
        {"sitemaps": SITEMAPS},
        name="sitemap_section",
    ),
]
