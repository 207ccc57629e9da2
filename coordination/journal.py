"""A node's own memory of the runs it committed: how a ledger that went backwards is caught.

The run ledger is the database's, and the database can forget: after a failover to an
*asynchronous* standby, the last transactions the old primary committed are gone, ledger rows
included, so a slot that really ran looks as if it never did, and the next leader runs it
again. No query on the new primary can see that; only the node that ran the slot knows.

So each group loop keeps, in memory, the last runs it committed (``KEEP`` per job). Whenever
the loop had reason to doubt its database (an error, a lost lock, a crash), it checks those
runs against the ledger once, before it leads again, with one query, and for each one that
is missing:

- logs an ERROR (``ledger went backwards``), with the job, the slot and what it means;
- a claim-first job's run had effects outside the database, which the failover did not undo:
  its ledger row is written back (``restore``), so that no leader runs the slot again;
- a transactional job's run was lost together with its effects, so running its slot again is
  right: the log says so, and nothing is written back.

A row for the slot written by another node means the slot already ran again; for a
claim-first job that is a double run, logged as such. A node that restarts forgets its
journal (what is lost then is documented in docs/ha.md); a follower with nothing to doubt
spends no statement on it.
"""

import logging
import threading
from collections import deque
from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import Q

from coordination import ledger
from coordination.models import JobRun

logger = logging.getLogger(__name__)

#: Runs remembered per job: far more than a failover window can hold at any sane cadence.
KEEP = 64

RESTORED_NOTE = (
    "written back by {node}: the database lost this run (a failover to a standby that had "
    "not received it); the run did happen on {node}"
)


@dataclass(frozen=True)
class Entry:
    """One run this node committed (``queued``: queued for a worker process, which takes its
    ledger row under its own instance)."""

    job: str
    slot: datetime
    transactional: bool
    trigger: str
    status: str = JobRun.Status.RUNNING
    queued: bool = False


class ClaimJournal:
    """The runs one group loop committed, and the check of them against the ledger."""

    def __init__(self, *, node: str, instance: str, log_prefix: str):
        self.node, self.instance, self.log_prefix = node, instance, log_prefix
        self._entries: dict[str, deque[Entry]] = {}
        self._doubt = False
        self._mutex = threading.Lock()  # job threads record, the loop thread checks

    def record(self, entry: Entry) -> None:
        """Remember a run whose ledger row has just been committed."""
        with self._mutex:
            self._entries.setdefault(entry.job, deque(maxlen=KEEP)).append(entry)

    def finished(self, job: str, slot: datetime, status: str) -> None:
        """Note a remembered run's outcome (written back as such if the ledger loses it)."""
        with self._mutex:
            runs = self._entries.get(job, ())
            for i, entry in enumerate(runs):
                if entry.slot == slot:
                    runs[i] = replace(entry, status=status)

    def doubt(self) -> None:
        """The database may have changed under us (error, lost lock): check before leading."""
        self._doubt = True

    @property
    def needs_check(self) -> bool:
        return self._doubt and any(self._entries.values())

    def check(self) -> int:
        """Compare the remembered runs with the ledger; return how many the ledger lost.

        Raises the database's error if it cannot be read (the doubt stays for next time).
        """
        with self._mutex:
            entries = [entry for runs in self._entries.values() for entry in runs]
        if not entries:
            self._doubt = False
            return 0
        wanted = Q()
        for job in {entry.job for entry in entries}:
            oldest = min(entry.slot for entry in entries if entry.job == job)
            wanted |= Q(job=job, slot__gte=oldest)
        found = {
            (job, slot): (instance, trigger)
            for job, slot, instance, trigger in JobRun.objects.filter(wanted).values_list(
                "job", "slot", "node_instance", "trigger"
            )
        }
        lost = 0
        for entry in entries:
            key = (entry.job, entry.slot)
            if key not in found:
                if _pruned(entry, found):
                    continue
                lost += 1
                self._report_lost(entry)
                continue
            instance, trigger = found[key]
            # A retry (of a failed run, or of one abandoned while this node was frozen)
            # rightly moves the run to the node that retried it, and a worker process takes a
            # queued run under its own instance.
            if (
                instance != self.instance
                and trigger != JobRun.Trigger.RETRY
                and not entry.transactional
                and not entry.queued
            ):
                logger.error(
                    "[%s] job %s slot %s ran twice: this node ran it, the database lost that "
                    "run in a failover, and %s ran it again",
                    self.log_prefix,
                    entry.job,
                    entry.slot.isoformat(),
                    instance or "another node",
                )
        self._doubt = False
        return lost

    def _report_lost(self, entry: Entry) -> None:
        if entry.transactional:
            logger.error(
                "[%s] ledger went backwards: job %s slot %s ran and committed on this node, "
                "but the database has no record of it (a failover to a standby that had not "
                "received it?). The job is transactional, so its effects were lost with it "
                "and the slot runs again.",
                self.log_prefix,
                entry.job,
                entry.slot.isoformat(),
            )
            return
        restored = restore(entry, node=self.node, instance=self.instance)
        logger.error(
            "[%s] ledger went backwards: job %s slot %s ran on this node, but the database "
            "has no record of it (a failover to a standby that had not received it?). %s",
            self.log_prefix,
            entry.job,
            entry.slot.isoformat(),
            "Its run is written back so that it does not run again."
            if restored
            else "Another node claimed the slot meanwhile: it may have run twice.",
        )


def _pruned(entry: Entry, found: dict) -> bool:
    """Whether a missing run was removed by retention rather than lost.

    Retention removes a job's *oldest* rows and a failover loses the *newest* commits, so a
    missing run with an older row of its job still in the ledger was lost; one with nothing
    older left was pruned (only possible after a long wait).
    """
    if any(job == entry.job and slot < entry.slot for job, slot in found):
        return False
    return not JobRun.objects.filter(job=entry.job, slot__lt=entry.slot).exists()


def restore(entry: Entry, *, node: str, instance: str) -> bool:
    """Write a lost claim-first run back into the ledger; return False if the slot is taken."""
    return ledger.restore_lost_run(
        job=entry.job,
        slot=entry.slot,
        status=entry.status,
        trigger=entry.trigger,
        node=node,
        instance=instance,
        note=RESTORED_NOTE.format(node=node),
    )
