"""The soak's webhook endpoint: a receiver every replica reaches, failing some first attempts.

It listens on the network's service address (a link no partition takes down; loopback
without namespaces) and records every request. The first attempt of about a quarter of the
deliveries fails, decided from the seed and the delivery id so a rerun fails the same ones:
a 500, a connection closed without an answer, or an answer slower than the replicas' read
timeout. Retries (the same delivery id) are answered 200, so every delivery can succeed.
"""

import hashlib
import threading
import uuid
from collections import Counter

from devtools.chaos.config import WEBHOOK_READ_TIMEOUT
from tests.support.webhook_receiver import Behaviour, Received, WebhookReceiver

OK = Behaviour(body=b"ok")
FAILURES = (
    (0.10, Behaviour(status=500, body=b"the receiver is down")),
    (0.20, Behaviour(close=True)),
    (0.25, Behaviour(delay=2 * WEBHOOK_READ_TIMEOUT)),
)


def delivery_id(headers: dict[str, str]) -> str:
    """Return the ``webhook-id`` of a request's ``headers`` (names compared without case)."""
    return next((value for name, value in headers.items() if name.lower() == "webhook-id"), "")


def flaky(seed: int):
    """Return the receiver's behaviour: a function of each request."""
    attempts: Counter = Counter()
    lock = threading.Lock()

    def behaviour(received: Received) -> Behaviour:
        delivery = delivery_id(received.headers)
        with lock:
            attempts[delivery] += 1
            first = attempts[delivery] == 1
        if not first:
            return OK
        digest = hashlib.sha256(f"{seed}:{delivery}".encode()).digest()
        chance = int.from_bytes(digest[:4], "big") / 2**32
        return next((answer for below, answer in FAILURES if chance < below), OK)

    return behaviour


def start(address: str, seed: int) -> tuple[WebhookReceiver, str]:
    """Start the receiver on ``address`` and add its endpoint; return it and its ledger name."""
    from outbox.models import WebhookEndpoint
    from outbox.webhooks.secrets import new_secret

    receiver = WebhookReceiver(flaky(seed), host=address).__enter__()
    endpoint = WebhookEndpoint.objects.create(
        name="chaos", url=receiver.url(), events=["published"], secret=new_secret()
    )
    return receiver, endpoint.ledger_name


def received_ids(receiver: WebhookReceiver) -> set[str]:
    """Return the delivery ids the receiver got (as 32 hex digits, as MariaDB stores them)."""
    found = set()
    for request in receiver.requests:
        try:
            found.add(uuid.UUID(delivery_id(request.headers)).hex)
        except ValueError:
            continue
    return found
