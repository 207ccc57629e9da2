"""Run-history retention: keep the newest ``INSTATIC_RUN_RETENTION`` ledger rows of every job.

Each job with more rows than that loses the older ones in one ``DELETE`` (the cut-off is the
slot of the last row kept, found through the ``(job, -slot)`` index). Rows of runs still in
progress (running, or timed out with the job still going) are never deleted, whatever their age.
"""

import logging

from django.db.models import Q

from coordination.conf import settings
from coordination.models import JobRun
from plugins.sdk import JobContext, hourly, plugin_job

logger = logging.getLogger(__name__)

# A timed-out run's worker may still be running (it has no finish time yet).
_IN_PROGRESS = Q(status=JobRun.Status.RUNNING) | Q(
    status=JobRun.Status.TIMED_OUT, finished_at__isnull=True
)


def prune_runs(*, keep: int, should_stop=lambda: False) -> dict[str, int]:
    """Delete all but the newest ``keep`` runs of every job; return the deletions by job.

    ``keep <= 0`` keeps everything.
    """
    deleted: dict[str, int] = {}
    if keep <= 0:
        return deleted
    jobs = JobRun.objects.order_by("job").values_list("job", flat=True).distinct()
    for job in list(jobs):
        if should_stop():
            break
        cutoff = list(
            JobRun.objects.filter(job=job)
            .order_by("-slot")
            .values_list("slot", flat=True)[keep - 1 : keep]
        )
        if not cutoff:
            continue
        count, _ = JobRun.objects.filter(job=job, slot__lt=cutoff[0]).exclude(_IN_PROGRESS).delete()
        if count:
            deleted[job] = count
    return deleted


@plugin_job(plugin="run_retention", name="prune", schedule=hourly(minute=23))
def prune(ctx: JobContext) -> None:
    """Every hour, trim the run ledger to the newest ``INSTATIC_RUN_RETENTION`` runs per job."""
    keep = int(settings.RUN_RETENTION)
    deleted = prune_runs(keep=keep, should_stop=ctx.should_stop)
    if deleted:
        ctx.logger.info(
            "deleted %d old run(s) of %d job(s), keeping the newest %d of each",
            sum(deleted.values()),
            len(deleted),
            keep,
        )
