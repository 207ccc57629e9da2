"""The time zone picker: zones grouped by region, a box to find one, the browser's zone first."""

from django import forms

from editors.zones import old_zone_names


class ZonePicker(forms.Select):
    """A list of zones by region with a search box above it (zone_picker.js).

    Without JavaScript it is the plain grouped list; with it, typing part of a zone's name
    narrows the list, and the zone the editor's browser is set to is offered first.
    """

    template_name = "editors/widgets/zone_picker.html"

    class Media:
        js = ["editors/zone_picker.js"]
        css = {"all": ["editors/zone_picker.css"]}

    def __init__(self, attrs=None):
        super().__init__(attrs={"size": 10, **(attrs or {})})

    def get_context(self, name, value, attrs):
        context = super().get_context(name, value, attrs)
        context["old_zone_names"] = old_zone_names()
        return context
