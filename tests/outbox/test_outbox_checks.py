"""The outbox's system checks: webhook timings that cannot work together are warned about."""

import pytest
from django.test import override_settings

from outbox.checks import check_webhook_timings


@pytest.mark.parametrize(
    "lease, deadline, connect, ids",
    [
        (60, 15, 3, []),
        (22.5, 15, 3, []),
        (20, 15, 3, ["outbox.W001"]),
        (60, 3, 3, ["outbox.W002"]),
        (3, 3, 5, ["outbox.W001", "outbox.W002"]),
    ],
)
def test_webhook_timings(lease, deadline, connect, ids):
    with override_settings(
        INSTATIC_WEBHOOK_LANE_LEASE=lease,
        INSTATIC_WEBHOOK_ATTEMPT_DEADLINE=deadline,
        INSTATIC_WEBHOOK_CONNECT_TIMEOUT=connect,
    ):
        assert [problem.id for problem in check_webhook_timings()] == ids
