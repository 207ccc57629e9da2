"""The admin's "view on site" redirect, limited to objects the user may see in the admin.

Django's ``/admin/r/<content type>/<id>/`` redirects any staff user to any object's
``get_absolute_url()``, so staff without access to posts could list draft slugs by id. This
view answers only for objects of a registered model that the user may view, and is the same
404 for "no such object" and "not yours to see". A model admin with an
``off_site_response(request, obj)`` method decides where objects with no public page go (it
returns None for the others).
"""

from django.contrib import admin
from django.contrib.contenttypes.models import ContentType
from django.contrib.contenttypes.views import shortcut
from django.http import Http404


def view_on_site(request, content_type_id, object_id):
    """Redirect to the object's public address if the user may view it in the admin."""
    try:
        model = ContentType.objects.get_for_id(content_type_id).model_class()
    except ContentType.DoesNotExist:
        raise Http404("No such object.") from None
    if model is None or not admin.site.is_registered(model):
        raise Http404("No such object.")
    model_admin = admin.site.get_model_admin(model)
    obj = model_admin.get_object(request, object_id)
    if obj is None or not model_admin.has_view_or_change_permission(request, obj):
        raise Http404("No such object.")
    off_site = getattr(model_admin, "off_site_response", None)
    response = off_site(request, obj) if off_site is not None else None
    return response or shortcut(request, content_type_id, object_id)
