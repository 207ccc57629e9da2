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
    # Seconds an attempt may wait for the connection, and for each read of the response.
    "WEBHOOK_CONNECT_TIMEOUT": 3.0,
    "WEBHOOK_READ_TIMEOUT": 10.0,
    # Seconds an attempt may take in all, from connect to the answer's last byte, however
    # slowly the endpoint sends: then it is cut off and counts as failed.
    "WEBHOOK_ATTEMPT_DEADLINE": 15.0,
    # Endpoints sent to side by side by one process (one lane each): a slow endpoint holds
    # only its own lane.
    "WEBHOOK_LANES": 32,
    # Seconds a lane holds its endpoint without renewing (a lane lost with its process
    # frees the endpoint after this long).
    "WEBHOOK_LANE_LEASE": 60.0,
    # Hours a replaced secret still signs beside the new one (the admin's default).
    "WEBHOOK_ROTATION_HOURS": 24,
    # Days finished deliveries, webhook attempts and people-told records are kept.
    "OUTBOX_RETENTION_DAYS": 30,
}


settings = AppSettings(_DEFAULTS)
