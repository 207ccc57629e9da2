"""Webhook secrets in the Standard Webhooks format: ``whsec_`` and the base64 of the key.

The site generates a secret for each endpoint (32 random bytes); one typed by an operator
must decode to 24 to 64 bytes, as the specification says. A secret is shown once, when it is
made, then only by its last characters (:func:`masked`). Rotation keeps the old secret
signing beside the new one until a time the operator chose, so a receiver can move to the
new secret at its own pace (:func:`signing_secrets`).
"""

import base64
import binascii
import secrets as random
from datetime import datetime

PREFIX = "whsec_"
#: The key size of a generated secret, and the sizes a typed one may have.
GENERATED_BYTES = 32
MIN_BYTES, MAX_BYTES = 24, 64
#: How many of a secret's last characters people see once it is saved.
SHOWN = 4


def new_secret() -> str:
    """Return a fresh secret: ``whsec_`` and the base64 of 32 random bytes."""
    return PREFIX + base64.b64encode(random.token_bytes(GENERATED_BYTES)).decode()


def key_of(secret: str) -> bytes:
    """Return the HMAC key of ``secret`` (the base64 after ``whsec_``, decoded)."""
    encoded = secret.removeprefix(PREFIX)
    # Unpadded base64 is accepted, as the specification's libraries accept it.
    return base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)


def problem(secret: str) -> str | None:
    """Return what is wrong with a typed ``secret``, in a sentence that says how to fix it,
    or None if nothing is."""
    if not secret.startswith(PREFIX):
        return (
            f"A webhook secret starts with {PREFIX} followed by base64 (the Standard Webhooks"
            " format); leave the field empty to have one generated."
        )
    try:
        size = len(key_of(secret))
    except (binascii.Error, ValueError):
        return f"The part after {PREFIX} is not valid base64; check that it was copied whole."
    if not MIN_BYTES <= size <= MAX_BYTES:
        return (
            f"The secret's key is {size} bytes; the Standard Webhooks specification asks for"
            f" {MIN_BYTES} to {MAX_BYTES}. Leave the field empty to have one generated."
        )
    return None


def masked(secret: str) -> str:
    """Return ``secret`` as people see it once saved: the prefix and its last characters."""
    if not secret:
        return ""
    return f"{PREFIX}…{secret[-SHOWN:]}"


def signing_secrets(
    current: str, previous: str, previous_until: datetime | None, *, now: datetime
) -> list[str]:
    """Return the secrets a delivery made ``now`` is signed with: the current one, and the
    previous one while its rotation window lasts."""
    if previous and previous_until is not None and now < previous_until:
        return [current, previous]
    return [current]
