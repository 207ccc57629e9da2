"""Keeping one group's loop leading: follow until the lock is ours, tick until it is not.

A group's thread runs ``Supervision.run``: it waits for the group's lock (after checking the
node's recent runs against the ledger whenever the database was in doubt), records the
leadership term, lets the loop tick while the lock holds, and follows again when it is lost.
A crash is logged and the loop started again with backoff, so a bug in a tick cannot leave a
node heartbeating but never leading again; at the end it stops the group's work within the
grace period and steps down.
"""

import logging
import time

from django.db import connection

from coordination import leadership, ledger
from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS, Backoff
from coordination.keys import format_key

#: The group loop's logger: its lines keep the name operators and log filters know them by.
logger = logging.getLogger("coordination.loop")

#: Longest pause before a crashed loop is started again (it starts at one second).
MAX_RESTART_DELAY = 30.0


class Supervision:
    """The leader election, crash restart and shutdown of one ``GroupLoop``."""

    def __init__(self, loop):
        self.loop = loop
        self.leading = False
        #: Monotonic time since which the loop is down after a crash (None: running).
        self.down_since: float | None = None
        self._restart_backoff = Backoff(first=1.0, cap=MAX_RESTART_DELAY)

    def run(self) -> None:
        """Run the loop; if it crashes, log it, start it again with backoff, and say so.

        A loop that died for good would leave the process up and heartbeating but never
        leading its group again. While it is down, ``down_since`` is set, which the node's
        health check reports.
        """
        loop = self.loop
        try:
            while True:
                try:
                    if loop.once:
                        self._run_once()
                    else:
                        self._run_forever()
                    return
                except Exception as exc:
                    delay = self._crashed(exc)
                    if loop.once or loop.stopping:
                        return
                    loop.waker.wait(delay)
                    loop.waker.clear()
        finally:
            self.shut_down()

    def _crashed(self, exc: Exception) -> float:
        """Log a crash, drop the lock (another node can lead meanwhile); return the delay."""
        loop = self.loop
        if self.down_since is None:
            self.down_since = time.monotonic()
        delay = self._restart_backoff.next()
        logger.error(
            "[%s] scheduler loop crashed; starting it again in %.0fs",
            loop.group.log_prefix,
            delay,
            exc_info=exc,
        )
        loop.scheduler.cut_off(f"the {loop.group.name} loop crashed")
        loop.journal.doubt()
        if self.leading:
            leadership.end(
                loop.group.name,
                instance=loop.node.instance,
                reason=leadership.EndReason.LOOP_CRASHED,
                detail=f"{type(exc).__name__}: {exc}",
            )
        self.leading = False
        try:
            loop.lock.close()
        except Exception:
            logger.debug("[%s] closing the lock after a crash failed", loop.group.log_prefix)
        connection.close()
        return delay

    def _running_again(self) -> None:
        if self.down_since is not None:
            logger.warning(
                "[%s] scheduler loop is running again after %.1fs",
                self.loop.group.log_prefix,
                time.monotonic() - self.down_since,
            )
            self.down_since = None
            self._restart_backoff.reset()

    def _run_forever(self) -> None:
        loop, lock = self.loop, self.loop.lock
        backoff = Backoff()
        while not loop.stopping:
            if not self.leading:
                if not self._journal_checked():
                    loop.waker.wait(backoff.next())
                    loop.waker.clear()
                    continue
                waited = time.monotonic()
                led = self.try_lead(wait=float(settings.LOCK_WAIT))
                self._running_again()
                if led:
                    backoff.reset()
                    continue
                # A failed acquire that returned at once means an error: back off.
                if time.monotonic() - waited < 0.05 and not loop.stopping:
                    loop.journal.doubt()
                    loop.waker.wait(backoff.next())
                    loop.waker.clear()
                continue
            try:
                sleep_for = loop.step()
                loop.scheduler.db_health.ok()
                backoff.reset()
            except DATABASE_ERRORS as exc:
                loop.scheduler.db_health.failed(exc)
                loop.journal.doubt()
                connection.close()
                sleep_for = backoff.next()
                loop.wake_for_tick()
            self._running_again()
            if self.leading and not lock.acquired:
                self._lost()
                continue
            if sleep_for > 0 and not loop.stopping:
                lock.wait_for_wakeup(sleep_for, loop.waker)
                if self.leading and not lock.acquired:
                    self._lost()

    def _journal_checked(self) -> bool:
        """Check this node's recent runs against the ledger if the database was in doubt.

        Before leading again after an error or a lost lock: a failover to a standby that
        missed the last commits would otherwise make this node (or another) run those slots
        again (see coordination/journal.py). Return False while the database cannot be read.
        """
        loop = self.loop
        if not loop.journal.needs_check:
            return True
        try:
            loop.journal.check()
        except DATABASE_ERRORS as exc:
            loop.scheduler.db_health.failed(exc)
            connection.close()
            return False
        return True

    def _run_once(self) -> None:
        loop = self.loop
        if not self.try_lead(wait=0):
            logger.info(
                "[%s] another node leads (key %s); nothing to do in --once mode",
                loop.group.log_prefix,
                format_key(loop.lock.key),
            )
            return
        # One slot per job per tick: tick again until everything that was due when this
        # started has run (a catch-up of several slots, a run-now behind a slot), no further.
        while not loop.stopping:
            loop.tick()
            for worker in list(loop.workers.values()):
                worker.join()
            if not loop.started_last_tick:
                return

    def try_lead(self, *, wait: float) -> bool:
        """Take the group's lock (waiting up to ``wait`` seconds), record the term and listen
        for wake-ups; return True when this loop now leads."""
        loop, lock = self.loop, self.loop.lock
        if not lock.acquire(wait=wait):
            return False
        try:
            self._record_leadership()
            lock.listen(loop.group.channel)
        except Exception as exc:
            # Django's errors from the work connection, psycopg's from the lock connection
            # (a database restarting at takeover): either way, not leader yet.
            logger.warning(
                "[%s] could not record leadership (%s); releasing the lock",
                loop.group.log_prefix,
                exc,
            )
            lock.close()
            connection.close()
            return False
        self.leading = True
        loop.took_over()
        loop.scheduler.metrics_leader_changed(loop.group.name)
        logger.info(
            "[%s] acquired advisory lock, %s (key %s, node %s)",
            loop.group.log_prefix,
            loop.group.running_text,
            format_key(lock.key),
            loop.node.name,
        )
        return True

    def _record_leadership(self) -> None:
        loop = self.loop
        leadership.begin(
            loop.group.name,
            node=loop.node.name,
            instance=loop.node.instance,
            key=loop.lock.key,
            session_id=loop.lock.session_id(),
        )

    def _lost(self) -> None:
        loop = self.loop
        self.leading = False
        loop.journal.doubt()
        leadership.end(
            loop.group.name, instance=loop.node.instance, reason=leadership.lost_reason()
        )
        if loop.workers:
            loop.scheduler.cut_off(f"the {loop.group.name} lock was lost with work running")
        logger.warning(
            "[%s] no longer leader (key %s); stopping this group's work and following",
            loop.group.log_prefix,
            format_key(loop.lock.key),
        )

    def shut_down(self) -> None:
        """Let the group's runs finish within the grace period (recording the rest abandoned),
        step down and release the lock."""
        loop = self.loop
        log_prefix = loop.group.log_prefix
        deadline = loop.scheduler.grace_deadline()
        for worker in list(loop.workers.values()):
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        still_running = [w for w in loop.workers.values() if w.is_alive()]
        try:
            if still_running:
                loop.scheduler.cut_off(f"{len(still_running)} run(s) outlived the grace period")
                logger.warning(
                    "[%s] %d job(s) still running after the grace period: %s",
                    log_prefix,
                    len(still_running),
                    ", ".join(w.job.name for w in still_running),
                )
                ledger.abandon_own(
                    loop.node.instance,
                    [w.job for w in still_running if not w.job.transactional],
                    reason="the node shut down before the run finished (grace period exceeded)",
                )
            if self.leading and loop.lock.acquired:
                leadership.step_down(loop.group.name, instance=loop.node.instance)
        except DATABASE_ERRORS as exc:
            logger.warning("[%s] could not tidy up at shutdown: %s", log_prefix, exc)
        if loop.lock.acquired and loop.lock.release():
            logger.info("[%s] released advisory lock key %s", log_prefix, format_key(loop.lock.key))
        self.leading = False
        loop.lock.close()
        loop.job_threads.shutdown()
        connection.close()
