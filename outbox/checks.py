"""System checks of the outbox's settings: webhook timings that cannot work together
(registered by ``OutboxConfig.ready()``)."""

from django.core import checks

from outbox.conf import settings


def check_webhook_timings(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Warn when a lane could lose its endpoint while an attempt runs, or when the attempt's
    deadline would cut off the connect timeout."""
    problems = []
    deadline = float(settings.WEBHOOK_ATTEMPT_DEADLINE)
    lease = float(settings.WEBHOOK_LANE_LEASE)
    connect = float(settings.WEBHOOK_CONNECT_TIMEOUT)
    # A lane renews a third of the way through its lease, when an outcome comes; outcomes
    # can be an attempt's deadline apart.
    if lease < 1.5 * deadline:
        problems.append(
            checks.Warning(
                f"INSTATIC_WEBHOOK_LANE_LEASE ({lease:g} s) is less than 1.5 times"
                f" INSTATIC_WEBHOOK_ATTEMPT_DEADLINE ({deadline:g} s): a lane waiting for a"
                " slow endpoint can lose its hold, and another lane send the same deliveries.",
                hint=f"Set INSTATIC_WEBHOOK_LANE_LEASE to at least {1.5 * deadline:g}.",
                id="outbox.W001",
            )
        )
    if deadline <= connect:
        problems.append(
            checks.Warning(
                f"INSTATIC_WEBHOOK_ATTEMPT_DEADLINE ({deadline:g} s) is not longer than"
                f" INSTATIC_WEBHOOK_CONNECT_TIMEOUT ({connect:g} s): an attempt can end before"
                " its connection is made.",
                hint="Make the attempt's deadline longer than the connect timeout.",
                id="outbox.W002",
            )
        )
    return problems
