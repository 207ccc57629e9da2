"""The public addresses of images: ``/media/<key>/<name>`` and ``/media/<key>/<width>/<name>``."""

from django.urls import path

from media import views

app_name = "media"
urlpatterns = [
    path("media/<str:key>/<str:name>", views.serve, name="image"),
    path("media/<str:key>/<int:width>/<str:name>", views.serve, name="image_width"),
]
