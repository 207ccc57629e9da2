from django.urls import path

from publishing import views

app_name = "publishing"
urlpatterns = [
    path("", views.index, name="index"),
]
