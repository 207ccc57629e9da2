"""The outbox's settings, read lazily from Django settings with ``INSTATIC_`` names.

Like :mod:`publishing.conf`: defaults and meanings live here, and tests override any of them
with ``override_settings(INSTATIC_WEBHOOK_ALLOW_PRIVATE=...)``.
"""

from coordination.conf import AppSettings

_DEFAULTS = {
    # Webhooks may reach private, loopback and link-local addresses only when this is on:
    # otherwise an endpoint could be a way into the internal network.
    "WEBHOOK_ALLOW_PRIVATE": False,
    # Plain http:// endpoints only when this is on (with DEBUG, http:// to loopback is allowed).
    "WEBHOOK_ALLOW_HTTP": False,
    # Seconds a webhook delivery is retried for before it is given up and its endpoint
    # disabled with an alert.
    "WEBHOOK_RETRY_FOR": 86_400,
    # Seconds before a failed attempt is tried again the first time (then doubling, at most
    # an hour apart).
    "WEBHOOK_RETRY_BACKOFF": 30,
    # Seconds an attempt may wait for the connection, and for the response.
    "WEBHOOK_CONNECT_TIMEOUT": 3.0,
    "WEBHOOK_READ_TIMEOUT": 10.0,
}


settings = AppSettings(_DEFAULTS)
