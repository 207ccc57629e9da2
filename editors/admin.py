"""The time zone on the admin's user page, as an inline of Django's own user admin."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from editors.forms import TimeZoneForm
from editors.models import EditorProfile

User = get_user_model()


class EditorProfileInline(admin.StackedInline):
    model = EditorProfile
    form = TimeZoneForm
    can_delete = False
    fields = ["time_zone"]
    verbose_name = verbose_name_plural = "time zone"


class EditorUserAdmin(UserAdmin):
    """Django's user admin with the editor's time zone below the user's fields."""

    inlines = [*UserAdmin.inlines, EditorProfileInline]


# Replace, not wrap: only one admin can be registered per model.
if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, EditorUserAdmin)
