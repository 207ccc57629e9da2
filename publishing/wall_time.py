"""Times typed in the editor's zone: a date, a time, and which instant a folded time is.

A wall time in a daylight-saving gap does not exist and one in a fold (clocks going back)
happens twice. :class:`WallTimeField` refuses a gap with a suggestion and, for a fold, asks
which of the two instants is meant, unless the form was opened with one of them.
"""

from datetime import UTC, datetime

from django import forms
from django.contrib.admin.widgets import (
    AdminSplitDateTime,
    BaseAdminDateWidget,
    BaseAdminTimeWidget,
)
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext as _

from publishing.validation import wall_time_problem


def _wall(value: datetime, zone) -> datetime:
    """Return ``value``'s wall time in ``zone`` to the second, as the form shows it."""
    return value.astimezone(zone).replace(tzinfo=None, microsecond=0, fold=0)


def fold_readings(wall: datetime, zone) -> list[datetime]:
    """Return the instants a naive wall time names in ``zone``: two in a fold, else one."""
    readings = {wall.replace(tzinfo=zone, fold=fold).astimezone(UTC) for fold in (0, 1)}
    return sorted(readings)


def fold_choice(value: datetime | None) -> str:
    """Return the instant ``value`` as the fold choice's value (ISO 8601, UTC), or "".

    Empty unless its wall time in the current zone happens twice: only then is the wall
    time not enough to say which instant the form shows.
    """
    if value is None:
        return ""
    zone = timezone.get_current_timezone()
    if len(fold_readings(_wall(value, zone), zone)) < 2:
        return ""
    return value.astimezone(UTC).isoformat()


def _reading_label(instant: datetime, zone, first: bool) -> str:
    local = instant.astimezone(zone)
    when = (
        _("the first time, before the clocks go back")
        if first
        else _("the second time, after the clocks go back")
    )
    return f"{local:%H:%M:%S} {local.tzname()}, {when}"


class WallTimeWidget(AdminSplitDateTime):
    """The admin's date and time inputs, and the instant the shown wall time means.

    The third input is hidden and empty unless the wall time happens twice in the editor's
    zone (clocks going back): then it is a choice of the two instants (ISO 8601, UTC), shown
    as "02:30:00 CEST (00:30:00 UTC)" and "02:30:00 CET (01:30:00 UTC)", the stored one
    checked, so a post stored in a fold is saved unchanged and an editor typing a folded time
    picks one reading without changing their time zone.
    """

    template_name = "admin/publishing/widgets/wall_time.html"

    def __init__(self, attrs=None):
        forms.MultiWidget.__init__(
            self, [BaseAdminDateWidget, BaseAdminTimeWidget, forms.HiddenInput], attrs
        )
        # The readings offered after the editor typed a folded time (set by WallTimeField).
        self.readings: list[datetime] | None = None

    def decompress(self, value):
        if not value:
            return [None, None, ""]
        local = timezone.localtime(value)
        return [local.date(), local.time(), fold_choice(value)]

    def get_context(self, name, value, attrs):
        context = super().get_context(name, value, attrs)
        context["zone_name"] = timezone.get_current_timezone_name()
        for subwidget in context["widget"]["subwidgets"][:2]:
            if subwidget["attrs"].get("id"):
                subwidget["attrs"]["aria-describedby"] = f"{subwidget['attrs']['id']}_format"
        values = value if isinstance(value, (list, tuple)) else self.decompress(value)
        chosen = _instant(values[2] if len(values) > 2 else "")
        zone = timezone.get_current_timezone()
        readings = self.readings
        if readings is None and chosen is not None and _shows(values, _wall(chosen, zone)):
            readings = fold_readings(_wall(chosen, zone), zone)
        if readings and len(readings) == 2:
            context["fold_name"] = context["widget"]["subwidgets"][2]["name"]
            context["fold_readings"] = [
                {
                    "value": reading.isoformat(),
                    "label": _reading_label(reading, zone, first=index == 0),
                    "checked": chosen is not None and chosen == reading,
                    "id": f"{context['widget']['attrs'].get('id', name)}_fold_{index}",
                }
                for index, reading in enumerate(readings)
            ]
        return context


def _shows(values, wall: datetime) -> bool:
    """Return True if the date and time inputs' ``values`` show the wall time ``wall``."""
    shown = f"{values[0]} {values[1]}".strip()
    return shown in {f"{wall:%Y-%m-%d %H:%M:%S}", f"{wall:%Y-%m-%d %H:%M}"} or shown.startswith(
        f"{wall:%Y-%m-%d %H:%M:%S}."
    )


def _instant(text) -> datetime | None:
    try:
        value = datetime.fromisoformat(text) if text else None
    except (TypeError, ValueError):
        return None
    return value if value is not None and timezone.is_aware(value) else None


class WallTimeField(forms.SplitDateTimeField):
    """A date and a time read in the current (the editor's) zone, refusing DST gaps and folds.

    Django's own field refuses them too, but only says the time "may be ambiguous or may not
    exist"; :func:`publishing.validation.wall_time_problem` says which, and what to enter.
    A wall time that happens twice is accepted when it names ``stored`` (the value the form
    was opened with: an unchanged time is never refused) or when the editor chose one of its
    two instants (:class:`WallTimeWidget`'s third input); otherwise the editor is asked which.
    """

    widget = WallTimeWidget

    def __init__(self, *args, **kwargs):
        # The admin's formfield_overrides would give Django's two-input widget.
        kwargs["widget"] = WallTimeWidget
        super().__init__(*args, **kwargs)
        self.stored: datetime | None = None
        self.chosen: datetime | None = None

    def clean(self, value):
        if self.disabled and not isinstance(value, list):
            value = self.widget.decompress(value)
        self.chosen = None
        if isinstance(value, (list, tuple)) and len(value) > 2:
            self.chosen, value = _instant(value[2]), list(value[:2])
        return super().clean(value)

    def compress(self, data_list):
        if not (data_list and all(part not in self.empty_values for part in data_list)):
            return super().compress(data_list)
        wall = datetime.combine(*data_list)
        zone = timezone.get_current_timezone()
        problem = wall_time_problem(wall, zone)
        if problem is None:
            return super().compress(data_list)
        for known in (self.chosen, self.stored):
            if known is not None and _wall(known, zone) == wall.replace(microsecond=0):
                return known
        readings = fold_readings(wall, zone)
        if len(readings) == 2:
            self.widget.readings = readings
        raise ValidationError(problem, code="wall_time")
