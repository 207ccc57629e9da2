"""The outcomes of a worker process's claim-first runs, written together (a group commit).

A worker process's run queues its outcome on the process's threads once its job function
returns, behind the runs taken with it, and a thread writes it and waits for the write
(``Worker._finish``: the outcome is in the ledger before the run counts as ended). A run's
outcome alone is a statement and a round trip of its own; when a burst of short runs ends on
eight threads at once, those round trips, and the server's work on each, are most of what the
burst costs. Here the first thread to arrive writes its outcome with
every outcome waiting behind it in one statement (``ledger.finish_many``), while those that
arrive during the write wait for the next one: a thread waits for at most two writes, and
each write carries as many outcomes as the threads finished meanwhile.

Every run's outcome is still conditional on the run being its attempt's (the fencing token of
``ledger.finish_with_state``), and each thread gets its own run's answer. Elsewhere than on
PostgreSQL, where ``finish_many`` writes one outcome at a time anyway, each thread writes its
own on its own connection, side by side.
"""

import copy
import threading
from dataclasses import dataclass, field

from django.db import connection

from coordination import ledger
from coordination.models import JobRun
from coordination.registry import Job


@dataclass(eq=False)
class _Finish:
    """One run's outcome waiting for its write, and what the write answered."""

    run: JobRun
    job: Job
    outcome: ledger.RunOutcome
    written: bool = False
    result: bool | None = None
    error: BaseException | None = field(default=None, repr=False)


class Finishes:
    """Write the outcomes of one worker process's runs, many in one statement."""

    def __init__(self, *, instance: str):
        self.instance = instance
        self._cond = threading.Condition()
        self._waiting: list[_Finish] = []
        self._writing = False

    def finish(self, run: JobRun, job: Job, outcome: ledger.RunOutcome) -> bool | None:
        """Record ``run``'s outcome (``ledger.finish_with_state``'s answer); a database error
        of the write is raised here, for the caller to try again."""
        if connection.vendor != "postgresql":
            return ledger.finish_with_state(run, job, outcome, instance=self.instance)
        mine = _Finish(run, job, outcome)
        with self._cond:
            self._waiting.append(mine)
            while self._writing and not mine.written:
                self._cond.wait()
            if not mine.written:
                # No write in progress and this outcome not written: this thread writes it,
                # with every outcome waiting.
                self._writing = True
                batch, self._waiting = self._waiting, []
        if not mine.written:
            self._write(batch)
        if mine.error is not None:
            raise mine.error
        return mine.result

    def _write(self, batch: list[_Finish]) -> None:
        """Write ``batch`` in one call; hand every waiting thread its answer or the error."""
        try:
            results = ledger.finish_many(
                [(f.run, f.job, f.outcome) for f in batch], instance=self.instance
            )
            for f, result in zip(batch, results, strict=True):
                f.result = result
        except BaseException as exc:
            for f in batch:
                # Each thread raises its own copy (raising writes a traceback on it).
                f.error = copy.copy(exc)
        finally:
            with self._cond:
                for f in batch:
                    f.written = True
                self._writing = False
                self._cond.notify_all()
