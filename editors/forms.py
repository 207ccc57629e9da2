"""The "my time zone" form an editor fills in for themself."""

from django import forms

from editors.models import EditorProfile


class MyTimeZoneForm(forms.ModelForm):
    class Meta:
        model = EditorProfile
        fields = ["time_zone"]
