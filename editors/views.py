"""The editor's own admin pages: the zone they work in, and the emails they get."""

from django.contrib import messages
from django.contrib.admin import site
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext as _

from editors.forms import MyNotificationsForm, MyTimeZoneForm
from editors.models import EditorProfile
from editors.sections import notifications_sections


def own_profile(user) -> EditorProfile:
    """Return ``user``'s profile, or an unsaved one with the site's defaults."""
    return EditorProfile.objects.filter(user=user).first() or EditorProfile(user=user)


def my_time_zone(request):
    """Show and change the signed-in user's time zone (wrapped in ``admin_view`` by urls)."""
    profile = own_profile(request.user)
    form = MyTimeZoneForm(request.POST or None, instance=profile)
    if request.method == "POST" and form.is_valid():
        form.save()
        zone = form.cleaned_data["time_zone"] or _("the site's zone")
        messages.success(request, _("Times in the admin are now shown in %s.") % zone)
        return redirect(request.path)
    context = {
        **site.each_context(request),
        "title": _("My time zone"),
        "form": form,
        "current_zone": timezone.get_current_timezone_name(),
        "now": timezone.localtime(),
    }
    return TemplateResponse(request, "admin/editors/my_time_zone.html", context)


def my_notifications(request):
    """Show and change which emails about their posts the signed-in user gets."""
    form = MyNotificationsForm(request.POST or None, instance=own_profile(request.user))
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, _("Your email settings are saved."))
        return redirect(request.path)
    context = {
        **site.each_context(request),
        "title": _("My notifications"),
        "form": form,
        "email": request.user.email,
        "sections": notifications_sections(request),
    }
    return TemplateResponse(request, "admin/editors/my_notifications.html", context)
