"""The editors' post form: content, the status to move to, and the publish times."""

from datetime import datetime

from django import forms
from django.core.exceptions import ValidationError
from django.forms.utils import ErrorDict
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from coordination.clock import database_now
from publishing import go_live
from publishing.actions import can_publish, edit_conflict
from publishing.conf import settings
from publishing.exceptions import EditConflict
from publishing.models import Post
from publishing.rendering import RenderError, images_without_alt, render_markdown
from publishing.stale_forms import MergingFormMixin
from publishing.validation import schedule_problems
from publishing.wall_time import WallTimeField

S = Post.Status

# The statuses an editor can move a post to from each status: the first keeps it as it is
# (the form's plain Save), the others are the publishing panel's buttons, with their labels.
TARGETS: dict[str, list[tuple[str, str]]] = {
    S.DRAFT: [
        (S.DRAFT, _("Keep as a draft")),
        (S.SCHEDULED, _("Schedule")),
        (S.PUBLISHED, _("Publish now")),
    ],
    S.SCHEDULED: [
        (S.SCHEDULED, _("Keep scheduled")),
        (S.PUBLISHED, _("Publish now")),
        (S.DRAFT, _("Unschedule")),
    ],
    S.PUBLISHED: [
        (S.PUBLISHED, _("Keep live")),
        (S.UNPUBLISHED, _("Take down")),
    ],
    S.UNPUBLISHED: [
        (S.UNPUBLISHED, _("Keep taken down")),
        (S.SCHEDULED, _("Schedule")),
        (S.PUBLISHED, _("Publish now")),
    ],
}

ACTION_HELP = {
    S.DRAFT: _(
        "Each button saves your changes first. Schedule: it goes live at the publish time "
        "above. Publish now: it goes live at once."
    ),
    S.SCHEDULED: _(
        "Each button saves your changes first. To move the publish time, change it above and save."
    ),
    S.PUBLISHED: _(
        "Take down saves your changes and hides the post from the public at once. A new "
        "text that goes live later is a revision."
    ),
    S.UNPUBLISHED: _(
        "Each button saves your changes first. Schedule: it goes live again at the publish "
        "time above."
    ),
}

#: The statuses a button puts a draft or unpublished post on its way live with.
GOING_LIVE = (S.SCHEDULED, S.PUBLISHED)

#: The name of the panel's buttons; their value is the status to move to.
ACTION_BUTTON = "_publishing_action"


class PublishingActionsWidget(forms.Widget):
    """The publishing panel's buttons: one per status the post can move to from its own.

    A button submits the whole form (the content is saved first) with its status under
    :data:`ACTION_BUTTON`. The field's value also travels in a hidden input, so that a form
    shown again (a merge of a stale submission) keeps the action the editor chose, and the
    plain Save carries it out; a button pressed wins over it.
    """

    template_name = "admin/publishing/widgets/publishing_actions.html"

    def __init__(self, attrs=None):
        super().__init__(attrs)
        self.current = S.DRAFT
        self.revisions_url = ""
        # What the post waits for before it may go live (a go-live check another app added
        # says so: reviews, "not approved as it is"): Schedule and Publish now are left out,
        # and the panel says why. Empty: nothing.
        self.needs_approval = ""

    def get_context(self, name, value, attrs):
        context = super().get_context(name, value, attrs)
        targets = dict(TARGETS[self.current])
        chosen = value if value in targets and value != self.current else None
        context["widget"].update(
            action_name=ACTION_BUTTON,
            buttons=[
                {"value": target, "label": label, "default": target == S.SCHEDULED}
                for target, label in TARGETS[self.current][1:]
                if not (self.needs_approval and target in GOING_LIVE)
            ],
            needs_approval=self.needs_approval,
            chosen=targets.get(chosen) if chosen else None,
            revisions_url=self.revisions_url if self.current == S.PUBLISHED else "",
            uses_times=any(t == S.SCHEDULED for t, _label in TARGETS[self.current][1:]),
        )
        return context

    def value_from_datadict(self, data, files, name):
        return data.get(ACTION_BUTTON) or data.get(name)


def _submitted_version(data) -> int | None:
    value = data.get("version", "")
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _same_second(submitted: datetime | None, stored: datetime | None) -> bool:
    if submitted is None or stored is None:
        return submitted is stored
    return submitted == stored.replace(microsecond=0) or submitted == stored


def post_values(post: Post) -> dict:
    """Return the values of ``post`` that its form edits and merges, and its status."""
    return {name: getattr(post, name) for name in (*PostAdminForm.merge_fields, "status")}


class PostAdminForm(MergingFormMixin, forms.ModelForm):
    """Validates what the editor asks for; the admin carries it out through the actions.

    ``user`` is set on the form class by :meth:`PostAdmin.get_form`. Users without the
    publish permission get no ``target_status`` field and no time fields: they draft only.

    ``version`` (hidden) is the post's version when the form was loaded, ``opened`` (hidden,
    signed) the values it was loaded with. A form submitted after someone else changed the
    post saves nothing: it comes back merged with their change (:mod:`publishing.stale_forms`)
    with one message saying who changed it and when (:attr:`conflict`), and the current
    version, so that saving the merged form is the editor's decision. The admin passes the
    version on to the actions, which check it again under the row lock. The choices and
    checks below are those of the status the form was loaded with, which the matching version
    guarantees.
    """

    target_status = forms.ChoiceField(
        label=_("Actions"), required=False, widget=PublishingActionsWidget
    )
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)
    opened = forms.CharField(widget=forms.HiddenInput, required=False)

    user = None
    merge_fields = ("title", "slug", "body", "publish_at", "unpublish_at")
    status_labels = dict(S.choices)
    stale = None
    opened_base = None
    merge_report = None

    class Meta:
        model = Post
        fields = ["title", "slug", "body", "publish_at", "unpublish_at"]
        field_classes = {"publish_at": WallTimeField, "unpublish_at": WallTimeField}

    def _needs_approval(self) -> str:
        """Return what the post waits for before it may go live, if a check another app added
        says it may not (a draft or unpublished post; new posts too): "" when it may."""
        if self.current_status not in (S.DRAFT, S.UNPUBLISHED):
            return ""
        if not go_live.editor_problem(go_live.POST, self.instance):
            return ""
        return go_live.editor_notice(go_live.POST) or _("It may not go live yet.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.current_status = self.instance.status if self.instance.pk else S.DRAFT
        self.fields["version"].initial = self.instance.version
        if "body" in self.fields:
            # The page's script (publishing/static/publishing/editor.js) previews from here.
            self.fields["body"].widget.attrs["data-live-preview-url"] = reverse(
                "publishing_live_preview"
            )
        self.conflict, stale = (None, None)
        if self.is_bound and self.instance.pk:
            self.conflict, stale = self._conflict()
        if self.user is None or not can_publish(self.user):
            # Drafting only: whatever such a user submits for the status is not even read.
            self.fields.pop("target_status", None)
        if "target_status" in self.fields:
            field = self.fields["target_status"]
            field.choices = TARGETS[self.current_status]
            field.initial = self.current_status
            field.widget.current = self.current_status
            field.widget.needs_approval = self._needs_approval()
            field.help_text = ACTION_HELP[self.current_status]
            if self.instance.pk:
                field.widget.revisions_url = reverse(
                    "admin:publishing_post_revisions", args=[self.instance.pk]
                )
        if self.current_status == S.PUBLISHED and "publish_at" in self.fields:
            # It is live: when it was planned to go live is history now.
            self.fields["publish_at"].disabled = True
            self.fields["publish_at"].help_text = _(
                "When it was planned to go live; it is live now (see Status above)."
            )
        if self.instance.pk:
            self.start_merge(
                post=self.instance.pk,
                version=self.instance.version,
                current=post_values(self.instance),
                stale=stale,
                submitted=_submitted_version(self.data) if self.is_bound else None,
            )

    def was_disabled(self, name: str, base: dict) -> bool:
        return name == "publish_at" and base.get("status") == S.PUBLISHED

    def status_allowed(self, status: str) -> bool:
        return status in dict(TARGETS[self.current_status])

    def _conflict(self) -> tuple[str | None, EditConflict | None]:
        """Return why this submission is stale, and the conflict to merge (None, None if not).

        Only a conflict the editor may go on with is merged: one who may not edit the post
        any more is told so, and their form keeps its version so it cannot be saved.
        """
        submitted = _submitted_version(self.data)
        if submitted is None:
            message = _(
                "This form carries no version of the post (it was opened before an update "
                "of the site). Nothing was saved: reload the post and make your change again."
            )
            return str(message), None
        conflict = edit_conflict(self.instance, submitted)
        if conflict is None:
            return None, None
        if self.user is not None and not self._may_edit_now():
            message = _(
                "%(conflict)s Nothing was saved, and you cannot edit it now: changing a "
                "scheduled or published post needs the “Can schedule and publish posts” "
                "permission. Your text is still in the form below; copy what you need."
            )
            return str(message % {"conflict": conflict}), None
        message = _(
            "%(conflict)s Nothing was saved. Their change and yours are merged in the form "
            "below: check it, then save to keep it."
        )
        return str(message % {"conflict": conflict}), conflict

    def _may_edit_now(self) -> bool:
        return self.current_status not in (S.SCHEDULED, S.PUBLISHED) or can_publish(self.user)

    def full_clean(self):
        """Validate, except that a stale submission is merged and reports only the conflict.

        Checked against the post as it is now, a stale form's other errors ("not one of the
        available choices", "must be in the future") would only describe the colleague's
        change in confusing terms.
        """
        super().full_clean()
        if self.stale is not None:
            self.merge_stale(self.conflict)
            # Cleaning copied the editor's values onto the post; the page shows it as it is.
            for name, value in self.merge_current.items():
                setattr(self.instance, name, value)
        elif self.conflict is not None:
            self._errors = ErrorDict()
            self.cleaned_data = {}
            self.add_error(None, self.conflict)

    def clean_body(self) -> str:
        return check_body(self.cleaned_data["body"])

    def clean(self):
        cleaned = super().clean()
        self.apply_picks(cleaned)
        if "target_status" not in self.fields:
            return cleaned
        target = cleaned.get("target_status") or self.current_status
        current = self.current_status
        publish_at = cleaned.get("publish_at")
        unpublish_at = cleaned.get("unpublish_at")
        if "publish_at" in self.errors or "unpublish_at" in self.errors:
            return cleaned
        initial_publish = self.instance.publish_at if self.instance.pk else None
        initial_unpublish = self.instance.unpublish_at if self.instance.pk else None
        # The form shows whole seconds: a time left as it was keeps its stored precision.
        if _same_second(publish_at, initial_publish):
            publish_at = cleaned["publish_at"] = initial_publish
        if _same_second(unpublish_at, initial_unpublish):
            unpublish_at = cleaned["unpublish_at"] = initial_unpublish
        now = database_now()
        if target == S.SCHEDULED:
            errors = schedule_problems(
                publish_at=publish_at,
                unpublish_at=unpublish_at,
                now=now,
                # An overdue (e.g. failed) scheduled post may keep its time: it goes out at once.
                check_publish_future=not (current == S.SCHEDULED and publish_at == initial_publish),
                check_unpublish_future=not (
                    current == S.SCHEDULED and unpublish_at == initial_unpublish
                ),
            )
        elif target == S.PUBLISHED:
            errors = schedule_problems(
                publish_at=publish_at,
                unpublish_at=unpublish_at,
                now=now,
                publish_required=False,
                check_publish_future=False,
                check_unpublish_future=unpublish_at != initial_unpublish or current != target,
            )
        else:
            errors = schedule_problems(
                publish_at=publish_at,
                unpublish_at=unpublish_at,
                now=now,
                publish_required=False,
                check_publish_future=False,
                check_unpublish_future=False,
            )
        for field, message in errors.items():
            self.add_error(field, message)
        return cleaned


def check_body(body: str) -> str:
    """Refuse a body over the length limit, one that cannot be rendered, or one with an image
    that has no alt text (one definition)."""
    limit = int(settings.POST_BODY_MAX_CHARS)
    if len(body) > limit:
        raise ValidationError(
            _("The body is %(length)s characters long; the limit is %(limit)s."),
            params={"length": f"{len(body):,}", "limit": f"{limit:,}"},
        )
    try:
        rendered = render_markdown(body)
    except RenderError as exc:
        raise ValidationError(
            _("This body cannot be published: %(error)s."), params={"error": exc}
        ) from None
    missing = images_without_alt(rendered)
    if missing:
        raise ValidationError(
            _(
                "The image %(address)s has no alt text. Write what it shows between the "
                "brackets, as in ![A red bicycle](%(address)s): people who cannot see it "
                "read this instead."
            ),
            params={"address": missing[0]},
        )
    return body


class RevisionForm(MergingFormMixin, forms.Form):
    """A live post's new title and body, and when they go live (in the editor's zone).

    ``current`` is what the page starts from: the pending revision's title, body and time, or
    the live post's title and body. ``version`` (hidden) is the post's version when the page
    was loaded and ``opened`` (hidden, signed) what it showed; a submission made against an
    older version is merged with the change made since (another revision scheduled, a direct
    edit, a revision switched in by the scheduler) and shown again, like the post form's
    (:mod:`publishing.stale_forms`). The admin passes the version on to
    :func:`publishing.revisions.schedule_revision`, which checks it again under the row lock.
    """

    title = forms.CharField(label=_("Title"), max_length=200)
    body = forms.CharField(label=_("Body"), widget=forms.Textarea(attrs={"rows": 16}))
    publish_at = WallTimeField(label=_("Goes live at"))
    version = forms.IntegerField(widget=forms.HiddenInput)
    opened = forms.CharField(widget=forms.HiddenInput, required=False)

    merge_fields = ("title", "body", "publish_at")
    stale = None
    opened_base = None
    merge_report = None

    def __init__(self, data=None, *, post: Post, current: dict, **kwargs):
        initial = {"title": current["title"], "body": current["body"], "version": post.version}
        if current["publish_at"] is not None:
            initial["publish_at"] = timezone.localtime(current["publish_at"])
        super().__init__(data, initial=initial, **kwargs)
        self.fields["publish_at"].help_text = _(
            "The public site shows the current version until then."
        )
        submitted = _submitted_version(self.data) if self.is_bound else None
        self.stale = edit_conflict(post, submitted) if submitted is not None else None
        self.start_merge(
            post=post.pk,
            version=post.version,
            current=current,
            stale=self.stale,
            submitted=submitted,
        )

    def full_clean(self):
        """Validate; a stale submission is merged instead and reports only the conflict."""
        super().full_clean()
        if self.stale is not None:
            message = _(
                "%(conflict)s Nothing was scheduled. Their change and yours are merged in the "
                "form below: check it, then schedule to keep it."
            )
            self.merge_stale(str(message % {"conflict": self.stale}))

    def clean(self):
        cleaned = super().clean()
        self.apply_picks(cleaned)
        if "publish_at" not in self.errors and cleaned.get("publish_at") is None:
            self.add_error("publish_at", _("Choose when the revision goes live."))
        return cleaned

    def clean_body(self) -> str:
        return check_body(self.cleaned_data["body"])

    def clean_publish_at(self) -> datetime:
        publish_at = self.cleaned_data["publish_at"]
        errors = schedule_problems(publish_at=publish_at, unpublish_at=None, now=database_now())
        if errors:
            raise ValidationError(errors["publish_at"])
        return publish_at


PREVIEW_LIFETIMES = [
    ("1", _("1 hour")),
    ("24", _("1 day")),
    ("168", _("7 days")),
    ("720", _("30 days")),
]


class PreviewLinkForm(forms.Form):
    """How long a new preview link works."""

    hours = forms.TypedChoiceField(
        label=_("Link works for"), choices=PREVIEW_LIFETIMES, coerce=int, initial="24"
    )
