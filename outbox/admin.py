"""The outbox in the admin: webhook endpoints (operators add them), deliveries and attempts.

Deliveries and attempts are the system's records, read-only, except "Send again": a
delivery (given up, or delivered and lost by the receiver) goes back to waiting, due now,
with the same delivery id.
"""

from django import forms
from django.contrib import admin, messages
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from coordination.admin import ReadOnlyAdminMixin
from coordination.admin_words import time_column
from outbox import wakeups
from outbox.admin_words import endpoint_names, subscriber_text
from outbox.job_names import WEBHOOKS_JOB
from outbox.models import Delivery, WebhookAttempt, WebhookEndpoint, is_webhook
from outbox.webhooks import addresses
from outbox.webhooks.sending import allow_http
from publishing.public_events import OUTBOX_KINDS

EVENT_CHOICES = [(kind, kind.replace("_", " ")) for kind in OUTBOX_KINDS]


class WebhookEndpointForm(forms.ModelForm):
    """The endpoint's events as checkboxes; its address checked as the sender will check it."""

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

    class Meta:
        model = WebhookEndpoint
        fields = ["name", "url", "events", "secret", "active"]

    def clean_url(self):
        url = self.cleaned_data["url"]
        problem = addresses.check_url(url, allow_http=allow_http(), allow_private=True)
        if problem:
            raise forms.ValidationError(problem)
        return url


class AttemptInline(ReadOnlyAdminMixin, admin.TabularInline):
    """The endpoint's latest attempts, newest first."""

    model = WebhookAttempt
    fields = ["attempted", "ok", "status_code", "duration", "error", "response_head"]
    readonly_fields = fields
    attempted = time_column("at", _("at"))
    extra = 0
    max_num = 0
    verbose_name_plural = _("latest attempts")

    def get_queryset(self, request):
        queryset = super().get_queryset(request).order_by("-at", "-id")
        ids = list(queryset.values_list("pk", flat=True)[:20])
        return queryset.filter(pk__in=ids)


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = ["name", "url", "active", "disabled_reason"]
    list_filter = ["active"]
    search_fields = ["name", "url"]
    readonly_fields = ["disabled_at", "disabled_reason"]
    inlines = [AttemptInline]

    def save_model(self, request, obj, form, change):
        if obj.active:
            obj.disabled_at, obj.disabled_reason = None, ""
        super().save_model(request, obj, form, change)
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
        "last_error",
    ]
    list_filter = ["status", "kind"]
    search_fields = ["subscriber", "=post_id", "=delivery_id"]
    ordering = ["-id"]
    show_full_result_count = False
    actions = ["send_again"]

    due = time_column("due_at", _("due at"))
    finished = time_column("finished_at", _("finished at"))

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
    list_display = ["at", "endpoint", "delivery", "ok", "status_code", "duration", "error"]
    list_filter = ["ok", "endpoint"]
    list_select_related = ["endpoint", "delivery"]
    ordering = ["-at", "-id"]
    show_full_result_count = False
