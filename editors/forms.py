"""The time zone field an editor fills in, on their own page and on the user admin."""

from django import forms

from editors.models import EditorProfile
from editors.widgets import ZonePicker
from editors.zones import grouped_zone_choices


class TimeZoneForm(forms.ModelForm):
    """An editor profile's zone, offered as current zones by region in the zone picker."""

    class Meta:
        model = EditorProfile
        fields = ["time_zone"]
        widgets = {"time_zone": ZonePicker}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["time_zone"].choices = grouped_zone_choices(self.instance.time_zone)


class MyTimeZoneForm(TimeZoneForm):
    """The "My time zone" page's form."""


class MyNotificationsForm(forms.ModelForm):
    """The "My notifications" page's form: which emails about their posts an editor gets."""

    class Meta:
        model = EditorProfile
        fields = list(EditorProfile.EMAIL_SWITCHES.values())
