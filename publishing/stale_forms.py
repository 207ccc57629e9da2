"""A form submitted after a colleague changed the post: merged with their change, shown again.

Every editing form carries what the editor opened (the *base*) in a hidden, signed ``opened``
field: the post's id and version and the values of the fields it edits. When the submitted
version is not the post's version any more, :class:`MergingFormMixin` merges the editor's
values with the post's current ones (:func:`publishing.merge.merge` decides), saves nothing,
and shows the form again with the merged values, the post's current version and a new base
(the current values). Fields both changed differently get a "keep theirs / keep yours"
choice; a form whose base still has such fields pending is refused until each is chosen.

The base is signed (``django.core.signing``, salted, with the post's id and version inside)
rather than read from the post's history: no table keeps every version of a post's text, and
a signed copy cannot be edited into a base that makes the merge drop a colleague's change, nor
be replayed on another post or version.
"""

from dataclasses import dataclass
from datetime import datetime

from django import forms
from django.core import signing
from django.forms.utils import ErrorDict
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _

from publishing.merge import merge, same
from publishing.validation import TIME_LABELS
from publishing.wall_time import fold_choice

OPENED_SALT = "publishing.stale_forms.opened"
TIME_FIELDS = tuple(TIME_LABELS)
KEEP_CHOICES = [("theirs", "theirs"), ("mine", "mine")]


@dataclass(frozen=True)
class Opened:
    """What the editor opened: the fields' values, and conflicts they still have to settle."""

    values: dict
    pending: tuple[str, ...]


def sign_opened(
    *, post: int, version: int, values: dict, pending=(), salt: str = OPENED_SALT
) -> str:
    """Return the signed ``opened`` field for ``values`` of ``post`` at ``version``.

    ``post`` is the id of the object edited; each kind of object signs with its own ``salt``,
    so a base signed for one can never be read as another's.
    """
    payload = {
        "post": post,
        "version": version,
        "values": {
            name: value.isoformat() if isinstance(value, datetime) else value
            for name, value in values.items()
        },
        "pending": list(pending),
    }
    return signing.dumps(payload, salt=salt, compress=True)


def read_opened(
    text,
    *,
    post: int,
    version: int | None,
    time_fields: tuple[str, ...] = TIME_FIELDS,
    salt: str = OPENED_SALT,
) -> Opened | None:
    """Return the base signed in ``text`` for ``post`` at ``version`` (None if it is not one)."""
    try:
        payload = signing.loads(text or "", salt=salt)
    except signing.BadSignature:
        return None
    if payload.get("post") != post or payload.get("version") != version:
        return None
    values = dict(payload["values"])
    for name in time_fields:
        if values.get(name):
            values[name] = datetime.fromisoformat(values[name])
    return Opened(values=values, pending=tuple(payload.get("pending", ())))


class _Unreadable:
    """An editor's value that does not validate: unlike any other, and shown as typed."""

    def __init__(self, raw, error):
        self.raw = raw
        self.error = error


def _display(value) -> str:
    if isinstance(value, _Unreadable):
        raw = value.raw
        return " ".join(str(part) for part in raw if part) if isinstance(raw, list) else str(raw)
    if value is None or value == "":
        return "—"
    if isinstance(value, datetime):
        return date_format(timezone.localtime(value), "Y-m-d H:i:s T")
    return str(value)


class MergingFormMixin:
    """Merge a stale submission with the current post; refuse unsettled conflicts.

    The form declares an ``opened`` hidden field, lists the fields it merges in
    ``merge_fields``, and calls :meth:`start_merge` at the end of ``__init__`` with the post's
    current values (taken before cleaning changes the instance) and the conflict of the
    submission (``actions.edit_conflict``), and :meth:`apply_picks` at the start of
    ``clean()``. Forms with a status choice merge ``status`` too (``target_status``).
    """

    merge_fields: tuple[str, ...] = ()
    status_labels: dict = {}
    #: The merged fields that hold times (shown in the editor's zone), and the signing salt
    #: of the kind of object the form edits.
    time_fields: tuple[str, ...] = TIME_FIELDS
    opened_salt: str = OPENED_SALT

    def start_merge(self, *, post: int, version: int, current: dict, stale, submitted):
        self.merge_post, self.merge_version, self.merge_current = post, version, current
        self.stale = stale
        self.merge_report: dict | None = None
        self.opened_base = (
            read_opened(
                self.data.get("opened"),
                post=post,
                version=submitted,
                time_fields=self.time_fields,
                salt=self.opened_salt,
            )
            if self.is_bound
            else None
        )
        # What an unbound form shows; a bound one shows the base it was submitted with, and a
        # stale one is given a new base by merge_stale().
        self.fields["opened"].initial = sign_opened(
            post=post, version=version, values=current, salt=self.opened_salt
        )
        base = self.opened_base.values if self.opened_base else current
        for name in self.time_fields:
            if name in self.fields:
                self.fields[name].stored = base.get(name)
        if self.opened_base and self.opened_base.pending and stale is None:
            for name in self.opened_base.pending:
                self.fields[f"keep_{name}"] = forms.ChoiceField(
                    choices=KEEP_CHOICES, widget=forms.RadioSelect, required=False
                )
            self._report(
                conflicts=self.opened_base.pending,
                theirs=self.opened_base.values,
                mine={
                    name: self._submitted(name, self.opened_base.values)
                    for name in self.opened_base.pending
                },
                taken=(),
                dropped=(),
            )

    # --- the names and values merged ---------------------------------------------------
    def _merge_names(self) -> list[str]:
        names = [name for name in self.merge_fields if name in self.fields]
        if "target_status" in self.fields:
            names.append("status")
        return names

    def _label(self, name: str) -> str:
        if name == "status":
            return _("status")
        return TIME_LABELS.get(name) or str(self.fields[name].label).lower()

    def was_disabled(self, name: str, base: dict) -> bool:
        """Return True if the field was not editable on the page the editor opened."""
        return False

    def _submitted(self, name: str, base: dict):
        """Return the editor's value of ``name``, read even from a field disabled now."""
        if name == "status":
            return self.data.get("target_status") or base["status"]
        if self.was_disabled(name, base):
            return base[name]
        field = self.fields[name]
        raw = field.widget.value_from_datadict(self.data, self.files, self.add_prefix(name))
        try:
            value = field.clean(raw)
        except forms.ValidationError as exc:
            return _Unreadable(raw, exc)
        old = base.get(name)
        # The form shows whole seconds: a time left alone is the stored instant.
        shown_unchanged = isinstance(value, datetime) and isinstance(old, datetime)
        return old if shown_unchanged and value == old.replace(microsecond=0) else value

    # --- a settled conflict ------------------------------------------------------------
    def apply_picks(self, cleaned: dict) -> None:
        """Use the colleague's value where the editor chose to keep theirs."""
        if self.stale is not None or not (self.opened_base and self.opened_base.pending):
            return
        for name in self.opened_base.pending:
            pick = cleaned.get(f"keep_{name}")
            if pick == "theirs":
                cleaned[name] = self.opened_base.values[name]
                self._errors.pop(name, None)
            elif pick != "mine":
                message = _("Choose which %(field)s to keep: theirs or yours.") % {
                    "field": self._label(name)
                }
                self.add_error(None, message)
                if name in self.fields and name not in self._errors:
                    self.add_error(name, message)

    # --- a stale submission ------------------------------------------------------------
    def merge_stale(self, message: str) -> None:
        """Replace the form's data by the merge, its errors by ``message``; nothing is saved."""
        names = self._merge_names()
        current = self.merge_current
        base = (
            self.opened_base.values
            if self.opened_base
            else {name: _Unreadable("", None) for name in names}
        )
        mine = {name: self._submitted(name, base) for name in names}
        unpicked = set()
        for name in self.opened_base.pending if self.opened_base else ():
            pick = self.data.get(f"keep_{name}")
            if pick == "theirs":
                mine[name] = base[name]
            elif pick != "mine":
                unpicked.add(name)
        result = merge(base=base, theirs=current, mine=mine, fields=names)
        # A field the post's new state disables (a live post's publish time) keeps its value.
        dropped = [
            name
            for name in names
            if name != "status"
            and self.fields[name].disabled
            and name not in result.theirs
            and not same(mine[name], current[name])
        ]
        conflicts = [
            name
            for name in names
            if name not in dropped
            and (
                name in result.conflicts
                or (name in unpicked and not same(mine[name], current[name]))
            )
        ]
        data = self.data.copy()
        data["version"] = str(self.merge_version)
        pending = [name for name in conflicts if name != "status"]
        data["opened"] = sign_opened(
            post=self.merge_post,
            version=self.merge_version,
            values=current,
            pending=pending,
            salt=self.opened_salt,
        )
        for name in names:
            data.pop(f"keep_{name}", None)
        for name in [*result.theirs, *dropped]:
            if name != "status":
                self._put(data, name, current[name])
        if "status" in names:
            status = mine["status"]
            if (
                "status" in result.theirs
                or "status" in conflicts
                or not self.status_allowed(status)
            ):
                status = current["status"]
            data["target_status"] = status
        self.data = data
        self._errors = ErrorDict()
        self.cleaned_data = {}
        self.add_error(None, message)
        for name in names:
            if isinstance(mine[name], _Unreadable) and mine[name].error is not None:
                self.add_error(name, mine[name].error)
            elif name in pending:
                self.add_error(
                    name,
                    _("You and %(who)s both changed this: choose which to keep, above.")
                    % {"who": self.stale.changed_by or _("someone")},
                )
        self._report(
            conflicts=conflicts, theirs=current, mine=mine, taken=result.theirs, dropped=dropped
        )

    def status_allowed(self, status: str) -> bool:
        return True

    def _put(self, data, name: str, value) -> None:
        """Set the submitted data of field ``name`` to show ``value``."""
        if name in self.time_fields:
            local = timezone.localtime(value) if value is not None else None
            parts = [
                f"{local:%Y-%m-%d}" if local else "",
                f"{local:%H:%M:%S}" if local else "",
                fold_choice(value),
            ]
            for index, part in enumerate(parts):
                data[f"{self.add_prefix(name)}_{index}"] = part
        else:
            data[self.add_prefix(name)] = value

    def _report(self, *, conflicts, theirs, mine, taken, dropped) -> None:
        def shown(name, value):
            if name == "status":
                return str(self.status_labels.get(value, value))
            return _display(value)

        self.merge_report = {
            "changed_by": (self.stale.changed_by if self.stale else "") or _("your colleague"),
            "conflicts": [
                {
                    "name": name,
                    "keep": f"keep_{name}",
                    "label": self._label(name),
                    "theirs": shown(name, theirs[name]),
                    "mine": shown(name, mine[name]),
                    "long": name == "body",
                    "picked": self.data.get(f"keep_{name}", ""),
                    "choosable": name != "status",
                }
                for name in conflicts
            ],
            "taken": [
                {"label": self._label(name), "value": shown(name, theirs[name])} for name in taken
            ],
            "dropped": [
                {"label": self._label(name), "mine": shown(name, mine[name])} for name in dropped
            ],
        }
