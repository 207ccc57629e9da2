"""A second SIGTERM (or Ctrl-C) ends a stopping scheduler at once.

The first signal stops it gracefully: no new work, the running job gets its grace period. An
operator who does not want to wait sends another; the process exits at once with 128 + the
signal, and the transactional run it was in rolls back for the next leader.
"""

import signal

import pytest

from coordination.models import JobRun
from tests.jobsapp.models import Effect

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]


def test_a_second_sigterm_ends_the_scheduler_at_once(schedulers):
    proc = schedulers(
        "impatient",
        "hatest_crash",
        env={"HATEST_SLOW_SECONDS": "60", "INSTATIC_SHUTDOWN_GRACE": "60"},
    )
    proc.wait_for_log(r"working on slot", timeout=20)
    proc.signal(signal.SIGTERM)
    proc.wait_for_log(r"received SIGTERM: stopping gracefully", timeout=10)
    assert proc.alive(), "the first signal waits for the running job"

    proc.signal(signal.SIGTERM)

    assert proc.wait(timeout=15) == 128 + signal.SIGTERM
    assert "received SIGTERM again: exiting at once" in proc.log()
    assert not JobRun.objects.filter(job="hatest.crashy").exclude(status="missed").exists()
    assert not Effect.objects.filter(job="hatest.crashy").exists()
