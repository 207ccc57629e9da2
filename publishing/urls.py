"""The public site's URLs (mounted at the site root by ``instatic.urls``)."""

from django.contrib.sitemaps.views import sitemap
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
    # Feed and sitemap get an ETag from their content and answer conditional requests.
    path("feed/", conditional_page(LatestPostsFeed()), name="feed"),
    path("sitemap.xml", conditional_page(sitemap), {"sitemaps": SITEMAPS}, name="sitemap"),
]
