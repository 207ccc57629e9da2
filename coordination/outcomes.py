"""What follows a recorded outcome of a run: its log line, its metrics and its alerts.

One place for the leader's job threads and the worker processes alike, so a run reads the
same in the logs wherever it executed.
"""

import logging

from coordination import alerts
from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS
from coordination.models import JobRun, JobState
from coordination.registry import Job

logger = logging.getLogger(__name__)


def report_outcome(
    job: Job,
    slot,
    status: str,
    duration: float,
    *,
    log_prefix: str,
    error: BaseException | None = None,
    paused: bool = False,
) -> None:
    """Log a finished run; alert when it paused its job or failed too often in a row."""
    if status == JobRun.Status.SUCCEEDED:
        logger.info(
            "[%s] job %s slot %s succeeded in %.3fs",
            log_prefix,
            job.name,
            slot.isoformat(),
            duration,
        )
    else:
        logger.error(
            "[%s] job %s slot %s %s after %.3fs: %s",
            log_prefix,
            job.name,
            slot.isoformat(),
            status,
            duration,
            (str(error).strip().splitlines() or [type(error).__name__])[0] if error else status,
        )
    if paused:
        logger.warning(
            "[%s] job %s paused itself after %s failures in a row; resume it in the admin",
            log_prefix,
            job.name,
            settings.FAILURE_PAUSE_THRESHOLD,
        )
    if status != JobRun.Status.SUCCEEDED:
        _alert_on_failure(job, status, error, paused=paused)


def _alert_on_failure(job: Job, status: str, error, *, paused: bool) -> None:
    """Alert when the job paused itself or reached ``INSTATIC_ALERT_AFTER_FAILURES``."""
    text = str(error).strip() if error else status
    if paused:
        alerts.job_paused_itself(job.name, int(settings.FAILURE_PAUSE_THRESHOLD), text)
        return
    threshold = int(settings.ALERT_AFTER_FAILURES)
    if threshold <= 0:
        return
    try:
        failures = (
            JobState.objects.filter(name=job.name)
            .values_list("consecutive_failures", flat=True)
            .first()
        )
    except DATABASE_ERRORS:
        return
    if failures is not None and failures >= threshold:
        alerts.job_failing(job.name, failures, text)
