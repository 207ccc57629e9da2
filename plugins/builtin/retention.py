"""Run-history retention: keep the newest ``INSTATIC_RUN_RETENTION`` ledger rows of every job,
and as many leadership terms of every group.

Built to prune a million rows while jobs keep running beside it. The jobs (groups) are found
by skipping through the ``(job, -slot)`` index one probe per job, not by a ``DISTINCT`` over
the ledger. Each job's cut-off is the slot of the last row kept (one probe of that index);
older rows go in batches of ``PRUNE_BATCH``: their ids read oldest first along the same
index, then one ``DELETE`` by primary key, each in its own short transaction. So no statement
holds more than a batch of row locks, none of them on a row a claim writes (a claim inserts a
new slot), and ``should_stop()`` is honoured between batches. Rows of runs still in progress
(running, or timed out with the job still going) are never deleted, whatever their age.
"""

import logging
from collections.abc import Callable, Iterator

from django.db.models import Q

from coordination import ledger
from coordination.conf import settings
from coordination.liveness.nodes import STOPPED_NODE_RETENTION, fold_stopped_nodes
from coordination.models import JobRun, LeadershipTerm
from plugins.sdk import JobContext, hourly, plugin_job

logger = logging.getLogger(__name__)


#: Rows deleted per statement (and per transaction).
PRUNE_BATCH = 2_000


def prune_runs(*, keep: int, should_stop=lambda: False, batch: int = PRUNE_BATCH) -> dict[str, int]:
    """Delete all but the newest ``keep`` runs of every job; return the deletions by job.

    ``keep <= 0`` keeps everything.
    """
    return _keep_newest(
        JobRun,
        by="job",
        order="slot",
        keep=keep,
        spare=JobRun.in_progress(),
        delete=ledger.delete_runs,
        should_stop=should_stop,
        batch=batch,
    )


def prune_terms(*, keep: int) -> int:
    """Delete all but the newest ``keep`` leadership terms of every group; return how many.

    An open term (its node still leads) is never deleted.
    """
    deleted = _keep_newest(
        LeadershipTerm,
        by="group",
        order="started_at",
        keep=keep,
        spare=Q(ended_at__isnull=True),
        delete=lambda ids: LeadershipTerm.objects.filter(pk__in=ids).delete()[0],
    )
    return sum(deleted.values())


def _distinct(model, by: str) -> Iterator[str]:
    """Yield every value of ``by`` in order, one index probe each (a loose index scan)."""
    rows = model.objects.order_by(by).values_list(by, flat=True)
    value = rows.first()
    while value is not None:
        yield value
        value = rows.filter(**{f"{by}__gt": value}).first()


def _keep_newest(
    model,
    *,
    by: str,
    order: str,
    keep: int,
    spare: Q,
    delete: Callable[[list], int],
    should_stop=lambda: False,
    batch: int = PRUNE_BATCH,
) -> dict[str, int]:
    """Per value of ``by``, delete the rows older than the newest ``keep`` (by ``order``),
    except those matching ``spare``, oldest first in batches of ``batch``, each batch's ids
    given to ``delete`` (which returns how many it deleted)."""
    deleted: dict[str, int] = {}
    if keep <= 0:
        return deleted
    for value in _distinct(model, by):
        if should_stop():
            break
        rows = model.objects.filter(**{by: value})
        cutoff = list(rows.order_by(f"-{order}").values_list(order, flat=True)[keep - 1 : keep])
        if not cutoff:
            continue
        old = rows.filter(**{f"{order}__lt": cutoff[0]}).exclude(spare).order_by(order)
        count = 0
        while not should_stop():
            # Read along the index from where the last batch ended (deleted rows are gone,
            # so ">=" neither loops nor skips rows that share an instant).
            found = list(old.values_list("pk", order)[:batch])
            if not found:
                break
            count += delete([pk for pk, _ in found])
            if len(found) < batch:
                break
            old = old.filter(**{f"{order}__gte": found[-1][1]})
        if count:
            deleted[value] = count
    return deleted


@plugin_job(plugin="run_retention", name="prune", schedule=hourly(minute=23))
def prune(ctx: JobContext) -> None:
    """Every hour, trim the run ledger to the newest ``INSTATIC_RUN_RETENTION`` runs per job
    (and the leadership history as many terms per group), and fold away the nodes stopped
    longer than ``STOPPED_NODE_RETENTION``."""
    keep = int(settings.RUN_RETENTION)
    deleted = prune_runs(keep=keep, should_stop=ctx.should_stop)
    terms = prune_terms(keep=keep)
    if terms:
        ctx.logger.info("deleted %d old leadership term(s), keeping %d per group", terms, keep)
    folded = fold_stopped_nodes()
    if folded:
        ctx.logger.info(
            "folded away %d node(s) stopped more than %s ago: %s",
            len(folded),
            STOPPED_NODE_RETENTION,
            ", ".join(folded[:10]),
        )
    if deleted:
        ctx.logger.info(
            "deleted %d old run(s) of %d job(s), keeping the newest %d of each",
            sum(deleted.values()),
            len(deleted),
            keep,
        )
