"""Run-history retention: keep the newest ``INSTATIC_RUN_RETENTION`` ledger rows of every job,
and as many leadership terms of every group.

Each job with more rows than that loses the older ones in one ``DELETE`` (the cut-off is the
slot of the last row kept, found through the ``(job, -slot)`` index). Rows of runs still in
progress (running, or timed out with the job still going) are never deleted, whatever their age.
"""

import logging

from django.db.models import Q

from coordination.conf import settings
from coordination.models import JobRun, LeadershipTerm
from plugins.sdk import JobContext, hourly, plugin_job

logger = logging.getLogger(__name__)


def prune_runs(*, keep: int, should_stop=lambda: False) -> dict[str, int]:
    """Delete all but the newest ``keep`` runs of every job; return the deletions by job.

    ``keep <= 0`` keeps everything.
    """
    return _keep_newest(
        JobRun,
        by="job",
        order="slot",
        keep=keep,
        spare=JobRun.in_progress(),
        should_stop=should_stop,
    )


def prune_terms(*, keep: int) -> int:
    """Delete all but the newest ``keep`` leadership terms of every group; return how many.

    An open term (its node still leads) is never deleted.
    """
    deleted = _keep_newest(
        LeadershipTerm, by="group", order="started_at", keep=keep, spare=Q(ended_at__isnull=True)
    )
    return sum(deleted.values())


def _keep_newest(model, *, by: str, order: str, keep: int, spare: Q, should_stop=lambda: False):
    """Per value of ``by``, delete the rows older than the newest ``keep`` (by ``order``),
    except those matching ``spare``; one ``DELETE`` per value, its cut-off found by index."""
    deleted: dict[str, int] = {}
    if keep <= 0:
        return deleted
    for value in list(model.objects.order_by(by).values_list(by, flat=True).distinct()):
        if should_stop():
            break
        rows = model.objects.filter(**{by: value})
        cutoff = list(rows.order_by(f"-{order}").values_list(order, flat=True)[keep - 1 : keep])
        if not cutoff:
            continue
        count, _ = rows.filter(**{f"{order}__lt": cutoff[0]}).exclude(spare).delete()
        if count:
            deleted[value] = count
    return deleted


@plugin_job(plugin="run_retention", name="prune", schedule=hourly(minute=23))
def prune(ctx: JobContext) -> None:
    """Every hour, trim the run ledger to the newest ``INSTATIC_RUN_RETENTION`` runs per job."""
    keep = int(settings.RUN_RETENTION)
    deleted = prune_runs(keep=keep, should_stop=ctx.should_stop)
    terms = prune_terms(keep=keep)
    if terms:
        ctx.logger.info("deleted %d old leadership term(s), keeping %d per group", terms, keep)
    if deleted:
        ctx.logger.info(
            "deleted %d old run(s) of %d job(s), keeping the newest %d of each",
            sum(deleted.values()),
            len(deleted),
            keep,
        )
