"""The "my time zone" admin page: every staff user sets the zone they work in."""

from django.contrib import messages
from django.contrib.admin import site
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext as _

from editors.forms import MyTimeZoneForm
from editors.models import EditorProfile


def my_time_zone(request):
    """Show and change the signed-in user's time zone (wrapped in ``admin_view`` by urls)."""
    profile = EditorProfile.objects.filter(user=request.user).first() or EditorProfile(
        user=request.user
    )
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
