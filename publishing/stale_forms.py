"""A form submitted after a colleague changed the post: merged with their change, shown again.

Every editing form carries what the editor opened (the *base*) in a hidden, signed ``opened``
field: the post's id and version and the values of the fields it edits. When the submitted
version is not the post's version any more, :class:`MergingFormMixin` merges the editor's
values with the post's current ones (:func:`publishing.merge.merge` decides), saves nothing,
and shows the form again with the merged values, the post's current version and a new base
(the current values). Fields both changed differently are a question: the colleague's version
beside the editor's, the words that differ marked (:func:`publishing.diffs.two_sides`), and
"keep theirs / keep yours"; a form whose base still has such fields pending is not saved
until each is chosen. The page is a question, not a form error: the form is not valid while a
merge waits for the editor (:meth:`MergingFormMixin.is_valid`), but its errors hold only what
the editor must correct; the merge's words are in :attr:`MergingFormMixin.merge_report`.
The colleague is named by their name (:func:`publishing.actions.person_name`), signed into the
base with the pending fields, so the page after a save without a choice names them too.

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
from django.utils.functional import cached_property
from django.utils.text import get_text_list
from django.utils.translation import gettext as _

from publishing.diffs import text_diff, two_sides
from publishing.merge import merge, same
from publishing.validation import TIME_LABELS
from publishing.wall_time import fold_choice

OPENED_SALT = "publishing.stale_forms.opened"
TIME_FIELDS = tuple(TIME_LABELS)
KEEP_CHOICES = [("theirs", "theirs"), ("mine", "mine")]
#: Fields of the editing forms that carry the page's workings, not what the editor wrote.
MACHINERY_FIELDS = ("version", "opened", "target_status")


@dataclass(frozen=True)
class Opened:
    """What the editor opened: the fields' values, and conflicts they still have to settle."""

    values: dict
    pending: tuple[str, ...]
    #: Who made the change the pending fields conflict with, as the editor was told.
    by: str = ""


def sign_opened(
    *, post: int, version: int, values: dict, pending=(), by: str = "", salt: str = OPENED_SALT
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
        "by": by,
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
    return Opened(
        values=values, pending=tuple(payload.get("pending", ())), by=payload.get("by", "")
    )


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
    """Merge a stale submission with the current post; hold unsettled conflicts.

    The form declares an ``opened`` hidden field, lists the fields it merges in
    ``merge_fields``, and calls :meth:`start_merge` at the end of ``__init__`` with the post's
    current values (taken before cleaning changes the instance) and the conflict of the
    submission (``actions.edit_conflict``), and :meth:`apply_picks` at the start of
    ``clean()``. Forms with a status choice merge ``status`` too (``target_status``). The
    page shows :attr:`merge_report` (``admin/publishing/merge.html``) above the form.
    """

    merge_fields: tuple[str, ...] = ()
    status_labels: dict = {}
    #: The merged fields that hold times (shown in the editor's zone), and the signing salt
    #: of the kind of object the form edits.
    time_fields: tuple[str, ...] = TIME_FIELDS
    opened_salt: str = OPENED_SALT
    #: True while the form shows a merge or a question the editor has not answered: it is
    #: then not valid, though its errors may be empty.
    merge_holds = False

    def start_merge(self, *, post: int, version: int, current: dict, stale, submitted):
        self.merge_post, self.merge_version, self.merge_current = post, version, current
        self.stale = stale
        self.merge_report: dict | None = None
        self.merge_holds = False
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
                by=self.opened_base.by,
            )

    def is_valid(self) -> bool:
        """Return False while a merge or an unanswered question waits for the editor."""
        return super().is_valid() and not self.merge_holds

    @cached_property
    def changed_data(self) -> list[str]:
        """Return the changed fields an editor reads about in the object's history (Django's
        "Changed Title and Body."): not the page's hidden version and base, nor a merge's
        choices, nor the status buttons (the publish history records what they did)."""
        return [
            name
            for name in super().changed_data
            if name not in MACHINERY_FIELDS and not name.startswith("keep_")
        ]

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
        """Use the colleague's value where the editor chose to keep theirs; a field not
        chosen holds the form, and the page asks again."""
        if self.stale is not None or not (self.opened_base and self.opened_base.pending):
            return
        unanswered = []
        for name in self.opened_base.pending:
            pick = cleaned.get(f"keep_{name}")
            if pick == "theirs":
                cleaned[name] = self.opened_base.values[name]
                self._errors.pop(name, None)
            elif pick != "mine":
                unanswered.append(self._label(name))
        if unanswered:
            self.merge_holds = True
            self.merge_report["unanswered"] = _(
                "Choose which %(fields)s to keep: %(who)s or yours."
            ) % {
                "fields": get_text_list(unanswered, _("and")),
                "who": _possessive(self.merge_report["changed_by"]),
            }

    # --- a stale submission ------------------------------------------------------------
    def merge_stale(self, message: str) -> None:
        """Replace the form's data by the merge, shown with ``message``; nothing is saved.

        The form's errors keep only the editor's values that do not validate.
        """
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
        by = self.stale.changed_by
        data["opened"] = sign_opened(
            post=self.merge_post,
            version=self.merge_version,
            values=current,
            pending=pending,
            by=by,
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
        self.merge_holds = True
        for name in names:
            if isinstance(mine[name], _Unreadable) and mine[name].error is not None:
                self.add_error(name, mine[name].error)
        self._report(
            conflicts=conflicts,
            theirs=current,
            mine=mine,
            taken=result.theirs,
            dropped=dropped,
            by=by,
            message=message,
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

    def _report(self, *, conflicts, theirs, mine, taken, dropped, by, message="") -> None:
        """Set :attr:`merge_report`, what the page says about the merge.

        Each conflict's two values are shown side by side, the words that differ marked
        (``theirs_lines`` and ``mine_lines``, rows of :mod:`publishing.diffs`).
        """

        def shown(name, value):
            if name == "status":
                return str(self.status_labels.get(value, value))
            return _display(value)

        who = by or _("someone else")
        rows = []
        for name in conflicts:
            their_text, my_text = shown(name, theirs[name]), shown(name, mine[name])
            their_lines, my_lines = two_sides(text_diff(their_text, my_text))
            label = self._label(name)
            rows.append(
                {
                    "name": name,
                    "keep": f"keep_{name}",
                    "label": label,
                    "theirs": their_text,
                    "mine": my_text,
                    "theirs_lines": their_lines,
                    "mine_lines": my_lines,
                    "keep_theirs": _("Keep %(whose)s %(field)s")
                    % {"whose": _possessive(who), "field": label},
                    "keep_mine": _("Keep your %(field)s (as in the form below)") % {"field": label},
                    "long": name == "body",
                    "picked": self.data.get(f"keep_{name}", ""),
                    "choosable": name != "status",
                }
            )
        asked = [_("the %(field)s") % {"field": row["label"]} for row in rows if row["choosable"]]
        if asked:
            question = _("You and %(who)s both changed %(fields)s: which do you want to keep?") % {
                "who": who,
                "fields": get_text_list(asked, _("and")),
            }
        else:
            question = _("While you were editing, %(who)s changed it too: keep both changes?") % {
                "who": who
            }
        self.merge_report = {
            "changed_by": who,
            "question": question,
            "message": message,
            "unanswered": "",
            "conflicts": rows,
            "taken": [
                {"label": self._label(name), "value": shown(name, theirs[name])} for name in taken
            ],
            "dropped": [
                {"label": self._label(name), "mine": shown(name, mine[name])} for name in dropped
            ],
        }


def _possessive(name: str) -> str:
    """Return ``name``'s possessive as an editor writes it: "Bob's", "Chris's"."""
    return _("%(name)s’s") % {"name": name}
