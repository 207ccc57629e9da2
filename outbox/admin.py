"""The outbox in the admin: webhook endpoints (operators add them), deliveries and attempts.

Deliveries and attempts are the system's records, read-only, except "Send again": a
delivery (given up, or delivered and lost by the receiver) goes back to waiting, due now,
with the same delivery id. An endpoint's secret is shown once, when it is made, then only
by its last characters; changing it keeps the old one signing for a window the operator
chooses (:mod:`outbox.webhooks.secrets`).
"""

from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.db.models.functions import Now
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from coordination.admin import ReadOnlyAdminMixin
from coordination.admin_words import duration_column, error_line, time_column, time_html
from coordination.clock import database_now
from outbox import wakeups
from outbox.admin_words import endpoint_names, subscriber_text
from outbox.conf import settings
from outbox.job_names import WEBHOOKS_JOB
from outbox.models import Delivery, WebhookAttempt, WebhookEndpoint, is_webhook
from outbox.webhooks import addresses, health, secrets
from outbox.webhooks.sending import allow_http, allow_private
from publishing.public_events import OUTBOX_KINDS

EVENT_CHOICES = [(kind, kind.replace("_", " ")) for kind in OUTBOX_KINDS]

#: The fields an admin save writes: never the lane's hold or the kept health, which the
#: sender changes meanwhile.
SAVED_FIELDS = [
    "name",
    "url",
    "events",
    "active",
    "secret",
    "previous_secret",
    "previous_secret_until",
    "disabled_at",
    "disabled_reason",
]


class WebhookEndpointForm(forms.ModelForm):
    """The endpoint's events as checkboxes; its address checked as the sender will check
    it; its secret typed or generated, never shown back."""

    url = forms.URLField(
        label=_("URL"),
        max_length=500,
        assume_scheme="https",
        widget=forms.URLInput(attrs={"class": "vURLField", "size": 80}),
        help_text=_("Where deliveries are POSTed: https://, unless plain http is allowed."),
    )
    events = forms.MultipleChoiceField(
        choices=EVENT_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("The publish events this endpoint is sent."),
    )
    new_secret = forms.CharField(
        label=_("new secret"),
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text=_(
            "Leave empty to keep the current secret (a new endpoint gets one generated), or"
            " type one in the Standard Webhooks format: whsec_ and base64 of 24 to 64 bytes."
        ),
    )
    generate_secret = forms.BooleanField(
        label=_("generate a new secret"),
        required=False,
        help_text=_("Replace the secret with a new random one, shown once after saving."),
    )
    keep_old_secret_hours = forms.IntegerField(
        label=_("old secret signs for (hours)"),
        min_value=0,
        max_value=24 * 90,
        required=False,
        help_text=_(
            "While a secret is replaced, deliveries are signed with the old one too for this"
            " long, so receivers can move to the new one; 0 ends the old one at once."
        ),
    )

    class Meta:
        model = WebhookEndpoint
        fields = ["name", "url", "events", "active"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["keep_old_secret_hours"].initial = int(settings.WEBHOOK_ROTATION_HOURS)

    def clean_url(self):
        url = self.cleaned_data["url"]
        problem = addresses.refusal(url, allow_http=allow_http(), allow_private=allow_private())
        if problem:
            raise forms.ValidationError(problem)
        return url

    def clean_new_secret(self):
        typed = self.cleaned_data.get("new_secret", "")
        if typed:
            problem = secrets.problem(typed)
            if problem:
                raise forms.ValidationError(problem)
        return typed

    def secret_to_set(self) -> str | None:
        """Return the secret this save sets (typed or generated), or None to keep it."""
        typed = self.cleaned_data.get("new_secret")
        if typed:
            return typed
        if self.cleaned_data.get("generate_secret") or not self.instance.secret:
            return secrets.new_secret()
        return None


class AttemptInline(ReadOnlyAdminMixin, admin.TabularInline):
    """The latest attempts, newest first: when, the answer, how long, what was said."""

    model = WebhookAttempt
    fields = ["attempted", "outcome", "took", "said"]
    readonly_fields = fields
    attempted = time_column("at", _("at"))
    took = duration_column("duration", _("took"))
    extra = 0
    max_num = 0
    verbose_name_plural = _("latest attempts")
    #: Attempts shown (an endpoint's page); a delivery's page shows all of its own.
    limit = 20

    @admin.display(description=_("answer"))
    def outcome(self, attempt):
        return attempt_outcome(attempt)

    @admin.display(description=_("what it said"))
    def said(self, attempt):
        return format_html(
            '<span style="white-space: pre-wrap; word-break: break-all">{}</span>',
            (attempt.error + "\n" if attempt.error else "") + attempt.response_head[:200],
        )

    def get_queryset(self, request):
        queryset = super().get_queryset(request).order_by("-at", "-id")
        if self.limit is None:
            return queryset
        ids = list(queryset.values_list("pk", flat=True)[: self.limit])
        return queryset.filter(pk__in=ids)


class DeliveryAttemptInline(AttemptInline):
    """Every attempt of one delivery."""

    fk_name = "delivery"
    limit = None
    verbose_name_plural = _("attempts")


def attempt_outcome(attempt: WebhookAttempt) -> str:
    """Return an attempt's answer in a few words: its status and whether it was a success."""
    if attempt.ok:
        return _("HTTP %(code)s: succeeded") % {"code": attempt.status_code}
    if attempt.status_code:
        return _("HTTP %(code)s: failed") % {"code": attempt.status_code}
    return _("no answer: failed")


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = [
        "name",
        "url",
        "status",
        "last_attempt",
        "last_success",
        "failing",
        "success_rate",
        "waiting",
    ]
    list_filter = ["active"]
    search_fields = ["name", "url"]
    inlines = [AttemptInline]
    readonly_fields = ["secret_shown", "last_attempt", "last_success", "failing", "disabled"]

    last_attempt = time_column("last_attempt_at", _("last attempt"))
    last_success = time_column("last_success_at", _("last success"))
    failing = time_column("failing_since", _("failing since"))

    def get_fieldsets(self, request, obj=None):
        secret_fields = ["secret_shown"]
        if self.has_change_permission(request, obj) or obj is None:
            secret_fields += ["new_secret", "generate_secret", "keep_old_secret_hours"]
        health_fields = ["last_attempt", "last_success", "failing", "disabled"]
        return [
            (None, {"fields": ["name", "url", "events", "active"]}),
            (_("Secret"), {"fields": secret_fields}),
            *([(_("Health"), {"fields": health_fields})] if obj is not None else []),
        ]

    @admin.display(description=_("secret"))
    def secret_shown(self, endpoint):
        if endpoint is None or not endpoint.secret:
            return _("generated when the endpoint is saved")
        shown = secrets.masked(endpoint.secret)
        until = endpoint.previous_secret_until
        if endpoint.previous_secret and until is not None and until > database_now():
            return format_html(
                "{} ({} {} {})",
                shown,
                _("the previous secret,"),
                secrets.masked(endpoint.previous_secret),
                format_html("{} {}", _("signs too until"), time_html(until)),
            )
        return shown

    @admin.display(description=_("disabled"))
    def disabled(self, endpoint):
        if endpoint.active or endpoint.disabled_at is None:
            return "–"
        return format_html("{}: {}", time_html(endpoint.disabled_at), endpoint.disabled_reason)

    @admin.display(description=_("status"))
    def status(self, endpoint):
        return health.state(
            active=endpoint.active,
            disabled_reason=error_line(endpoint.disabled_reason, 120),
            failing_since=endpoint.failing_since,
        )

    @admin.display(description=_("succeeded, last day"))
    def success_rate(self, endpoint):
        ok, done = getattr(endpoint, "day_rate", None) or (0, 0)
        return health.rate_text(ok, done)

    @admin.display(description=_("waiting"))
    def waiting(self, endpoint):
        return getattr(endpoint, "waiting_count", 0)

    def get_changelist_instance(self, request):
        """Read the page's day rates and waiting counts in one query each."""
        changelist = super().get_changelist_instance(request)
        rows = list(changelist.result_list)
        ids = [row.pk for row in rows]
        rates = health.day_rates(ids, now=database_now())
        waiting = health.waiting(ids)
        for row in rows:
            row.day_rate = rates.get(row.pk)
            row.waiting_count = waiting.get(row.pk, 0)
        return changelist

    def save_model(self, request, obj, form, change):
        secret = form.secret_to_set()
        if secret is not None:
            if change and obj.secret:
                hours = form.cleaned_data.get("keep_old_secret_hours")
                if hours is None:
                    hours = int(settings.WEBHOOK_ROTATION_HOURS)
                obj.previous_secret = obj.secret
                obj.previous_secret_until = database_now() + timedelta(hours=hours)
            obj.secret = secret
        if obj.active:
            obj.disabled_at, obj.disabled_reason = None, ""
        if change:
            obj.save(update_fields=SAVED_FIELDS)
        else:
            obj.save()
        if secret is not None:
            self.message_user(
                request,
                format_html(
                    "{} <code>{}</code> {}",
                    _("The endpoint's new secret is"),
                    secret,
                    _("— copy it to the receiver now: it is not shown again."),
                ),
                messages.WARNING,
            )
        if obj.active:
            wakeups.wake([WEBHOOKS_JOB])  # its waiting deliveries go now


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "event_id",
        "kind",
        "post_id",
        "to",
        "status",
        "attempts",
        "due",
        "finished",
        "error",
    ]
    list_filter = ["status", "kind"]
    search_fields = ["subscriber", "=post_id", "=delivery_id"]
    ordering = ["-id"]
    show_full_result_count = False
    actions = ["send_again"]
    inlines = [DeliveryAttemptInline]
    fields = [
        "delivery_id",
        "kind",
        "event",
        "post_id",
        "to",
        "status",
        "attempts",
        "due",
        "finished",
        "last_error",
        "payload",
        "headers_sent",
    ]
    readonly_fields = fields

    due = time_column("due_at", _("due at"))
    finished = time_column("finished_at", _("finished at"))

    @admin.display(description=_("last error"))
    def error(self, delivery):
        return error_line(delivery.last_error, 120)

    @admin.display(description=_("payload"))
    def payload(self, delivery):
        attempt = self._last_attempt(delivery)
        if attempt is None or not attempt.request_body:
            return "–"
        return format_html("<pre style='white-space: pre-wrap'>{}</pre>", attempt.request_body)

    @admin.display(description=_("headers sent (signatures redacted)"))
    def headers_sent(self, delivery):
        attempt = self._last_attempt(delivery)
        if attempt is None or not attempt.request_headers:
            return "–"
        lines = "\n".join(f"{name}: {value}" for name, value in attempt.request_headers.items())
        return format_html("<pre>{}</pre>", lines)

    def _last_attempt(self, delivery):
        if not hasattr(delivery, "_last_attempt"):
            delivery._last_attempt = (
                WebhookAttempt.objects.filter(delivery=delivery).order_by("-at", "-id").first()
            )
        return delivery._last_attempt

    def get_changelist_instance(self, request):
        """Name the page's webhook endpoints, read in one query for the page."""
        changelist = super().get_changelist_instance(request)
        rows = list(changelist.result_list)  # evaluated once: the page shows these objects
        names = endpoint_names(row.subscriber for row in rows)
        for row in rows:
            row.endpoint_names = names
        return changelist

    @admin.display(description=_("to"), ordering="subscriber")
    def to(self, delivery):
        names = getattr(delivery, "endpoint_names", None)
        if names is None:
            names = endpoint_names([delivery.subscriber])
        return subscriber_text(delivery.subscriber, names)

    @admin.action(description=_("Send again"), permissions=["send"])
    def send_again(self, request, queryset):
        """Put the selected deliveries back to waiting, due now, with the same delivery ids."""
        names = set(queryset.values_list("subscriber", flat=True))
        count = queryset.update(
            status=Delivery.Status.PENDING, finished_at=None, due_at=Now(), run=None
        )
        wakeups.wake(WEBHOOKS_JOB if is_webhook(name) else name for name in names)
        self.message_user(
            request,
            ngettext("%d delivery will be sent again.", "%d deliveries will be sent again.", count)
            % count,
            messages.SUCCESS,
        )

    def has_send_permission(self, request):
        return request.user.has_perm("outbox.change_webhookendpoint")


@admin.register(WebhookAttempt)
class WebhookAttemptAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["attempted", "endpoint", "delivery_link", "outcome", "took", "error_text"]
    list_filter = ["ok", "endpoint"]
    list_select_related = ["endpoint"]
    ordering = ["-at", "-id"]
    show_full_result_count = False
    exclude = ["request_headers"]

    attempted = time_column("at", _("at"))
    took = duration_column("duration", _("took"))

    @admin.display(description=_("delivery"))
    def delivery_link(self, attempt):
        return format_html(
            '<a href="../delivery/{}/change/">{}</a>', attempt.delivery_id, attempt.delivery_id
        )

    @admin.display(description=_("answer"), ordering="status_code")
    def outcome(self, attempt):
        return attempt_outcome(attempt)

    @admin.display(description=_("error"))
    def error_text(self, attempt):
        return error_line(attempt.error, 120)
