"""A leader's upkeep of its group, besides its ticks: when to do it, and doing it.

Maintenance makes the job states match what is declared (new jobs get a state, changed ones a
new schedule), retires the jobs no live node declares, and marks the runs of dead nodes
abandoned. It runs when asked (a new leader, an operator's command), at a recheck instant (once
the previous leader's lease has run out, or, sooner, once a node whose runs it could not prove
dead passes its lease: ``recheck_instant``), every ``MAINTENANCE_INTERVAL`` seconds, and whenever
a tick's read finds the states and the declarations apart. The runs out on worker processes
are swept every half lease while any is out (``workers.sweep``), and watched more often: a
worker process the server shows gone has its runs released at the next tick's read, and while
runs are queued for workers or claim-first runs in progress there the loop wakes for such a
read at least every ``WATCH_INTERVAL`` seconds, and for each sweep (``recheck_at``), however
long it would sleep otherwise.
The loop (coordination/loop.py) asks ``due``/``sweep_due`` before it reads, and reads again
after.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from coordination import ledger
from coordination.conf import settings
from coordination.models import JobState
from coordination.registry import Job
from coordination.selectors import declared_by_live_nodes, first_lease_end_with_runs
from coordination.workers import sweep as workers_sweep

logger = logging.getLogger(__name__)

MAINTENANCE_INTERVAL = 300.0
#: While runs are out on workers, the longest (seconds) between two looks for a worker process
#: gone with its runs (``workers.sweep.watch``): a killed worker's runs are released within
#: about this long plus the server's ending of its sessions, well within a second.
WATCH_INTERVAL = 0.5
#: The shortest (seconds) between two such looks: a leader that ticks often (a burst) looks at
#: most this often; one that ticks for a slot looks just before planning it.
WATCH_MIN = 0.2


#: How long after a node's lease has run out its runs are looked at again (seconds): the
#: database's clock and the loop's wake-up are each a little late or early.
LEASE_END_MARGIN = 0.1


def recheck_instant(
    current: float | None, lease_end: datetime | None, now: datetime, *, monotonic: float
) -> float | None:
    """Return when maintenance is next due (monotonic): at ``current``, or sooner, just after
    ``lease_end`` (database time, read at ``now``; ``monotonic`` is the same moment on this
    process's clock). A node with runs out that could not be proven gone (its sessions still
    there, or its heartbeat too old for their absence to prove a death) has them abandoned as
    its lease runs out, however late its leader took over."""
    if lease_end is None:
        return current
    at = monotonic + max(0.0, (lease_end - now).total_seconds()) + LEASE_END_MARGIN
    return at if current is None else min(current, at)


def sweep_interval() -> float:
    """Seconds between sweeps of the runs on workers: half the lease, so a dead worker's run
    is found within about a lease and a half of its last heartbeat."""
    return float(settings.LEASE) / 2


@dataclass
class Maintenance:
    """When group ``group``'s leader (node instance ``instance``) next looks after its states
    and the runs of dead nodes: when ``requested``, at ``recheck_at`` (monotonic), and every
    ``MAINTENANCE_INTERVAL`` seconds since ``last``; and when it next sweeps the runs on
    workers (``sweep_at``, monotonic; ``None``: none are out)."""

    group: str
    instance: str
    requested: bool = True
    last: float = 0.0
    #: When maintenance is due again (monotonic; the previous leader's lease run out).
    maintenance_at: float | None = None
    sweep_at: float | None = None
    #: When the runs on workers were last watched (monotonic), and whether runs were queued
    #: for workers or claim-first runs in progress there then (the loop wakes to watch them).
    watched_at: float = 0.0
    watching: bool = False

    @property
    def recheck_at(self) -> float | None:
        """Return when the loop must read again (monotonic): for maintenance, and, while runs
        are queued for workers or in progress there, to watch them (``WATCH_INTERVAL``) and
        to sweep them. A leader with nothing else due sleeps up to
        ``INSTATIC_NOTIFY_MAX_TICK``, and a worker killed mid-run wakes nobody."""
        instants = [self.maintenance_at]
        if self.sweep_at is not None and self.watching:
            instants += [self.sweep_at, self.watched_at + WATCH_INTERVAL]
        return min((at for at in instants if at is not None), default=None)

    @recheck_at.setter
    def recheck_at(self, at: float | None) -> None:
        """Make maintenance due at ``at`` (monotonic)."""
        self.maintenance_at = at

    def due(self, declared: dict[str, Job], by_name: dict[str, JobState]) -> bool:
        """Return whether maintenance is due, given the jobs ``declared`` and the states read."""
        if self.requested:
            return True
        if self.maintenance_at is not None and time.monotonic() >= self.maintenance_at:
            self.maintenance_at = None
            return True
        if time.monotonic() - self.last > MAINTENANCE_INTERVAL:
            return True
        for name, job in declared.items():
            state = by_name.get(name)
            if state is None or state.fingerprint != job.fingerprint or state.retired_at:
                return True
        return any(name not in declared and not s.retired_at for name, s in by_name.items())

    def run(
        self,
        now: datetime,
        declared: dict[str, Job],
        by_name: dict[str, JobState],
        *,
        log_prefix: str,
        paused: Callable[[Job, Exception], None],
    ) -> None:
        """Bring the states in line with ``declared`` (``paused(job, error)`` for each job
        paused because its state could not be planned), retire undeclared jobs and abandon
        the runs of dead nodes. The runs on workers are swept at the next read, at once
        while any is out (``recheck_at``)."""
        logger.debug(
            "[%s] maintenance (requested %s, states %s, declared %s)",
            log_prefix,
            self.requested,
            sorted(by_name),
            sorted(declared),
        )
        self.requested = False
        self.last = time.monotonic()
        unplannable = ledger.ensure_states(list(declared.values()), by_name, now)
        for name, exc in unplannable.items():
            paused(declared[name], exc)
        undeclared = {n for n, s in by_name.items() if n not in declared and not s.retired_at}
        if undeclared:
            retired = ledger.retire_undeclared(self.group, set(declared), declared_by_live_nodes())
            if retired:
                logger.info("[%s] retired %d job(s) no live node declares", log_prefix, retired)
        jobs = list(declared.values())
        abandoned = ledger.abandon_orphans(jobs)
        abandoned += ledger.abandon_vanished(jobs, instance=self.instance)
        if abandoned:
            logger.warning(
                "[%s] marked %d run(s) of dead nodes as abandoned", log_prefix, abandoned
            )
        lease_end = first_lease_end_with_runs(list(declared), besides=self.instance)
        self.maintenance_at = recheck_instant(
            self.maintenance_at, lease_end, now, monotonic=time.monotonic()
        )
        self.sweep_at = time.monotonic()  # a new leader looks after the runs on workers at once
        self.watching = workers_sweep.runs_out(jobs)  # and watches those it inherits

    def runs_queued(self) -> None:
        """Note that runs went out to workers: sweep them within half a lease, and watch them
        from the next ``WATCH_INTERVAL`` on, however long the loop would sleep otherwise."""
        if self.sweep_at is None:
            self.sweep_at = time.monotonic() + sweep_interval()
        self.watching = True

    def sweep_due(self) -> bool:
        """Return whether the runs on workers are to be swept, or watched, at this read."""
        if self.sweep_at is None:
            return False
        now = time.monotonic()
        return now >= self.sweep_at or now >= self.watched_at + WATCH_MIN

    def sweep(self, declared: dict[str, Job]) -> None:
        """Watch the group's runs on workers (``workers.sweep.watch``: the runs of worker
        processes gone released), and sweep them when that found any or a sweep is due
        (``workers.sweep``: dead workers fenced, their runs abandoned or queued again); plan
        the next sweep while any run is still queued or running. The caller reads the retries
        the outcomes asked for."""
        jobs = [job for job in declared.values() if job.on_workers]
        self.watched_at = time.monotonic()
        watched = workers_sweep.watch(jobs)
        self.watching = watched.running
        if not watched.released and self.watched_at < (self.sweep_at or 0.0):
            return
        outstanding = workers_sweep.sweep(jobs)
        self.sweep_at = time.monotonic() + sweep_interval() if outstanding else None
