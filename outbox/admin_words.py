"""The words the admin shows for the delivery ledger's values: who a delivery is for."""

from collections.abc import Iterable

from django.utils.translation import gettext as _

from outbox.job_names import NOTIFY_JOB
from outbox.models import WEBHOOK_PREFIX, WebhookEndpoint, is_webhook


def endpoint_names(subscribers: Iterable[str]) -> dict[str, str]:
    """Return the endpoint name of each webhook among ``subscribers`` (one query)."""
    ids = [name.removeprefix(WEBHOOK_PREFIX) for name in subscribers if is_webhook(name)]
    ids = [int(pk) for pk in ids if pk.isdigit()]
    if not ids:
        return {}
    rows = WebhookEndpoint.objects.filter(pk__in=ids).values_list("pk", "name")
    return {f"{WEBHOOK_PREFIX}{pk}": name for pk, name in rows}


def subscriber_text(name: str, endpoints: dict[str, str]) -> str:
    """Return who the delivery ledger's ``name`` is, as an editor reads it."""
    if name == NOTIFY_JOB:
        return _("Emails to the author and watchers")
    if is_webhook(name):
        endpoint = endpoints.get(name)
        if endpoint is None:
            return _("Webhook (deleted)")
        return _("Webhook “%(name)s”") % {"name": endpoint}
    return _("Subscriber %(job)s") % {"job": name}
