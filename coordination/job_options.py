"""A job's options: its missed-slot policy, how it runs, and when a failed run is tried again.

``@job``, the plugin SDK's ``@plugin_job`` and ``make_job`` take these as keyword arguments
and build one :class:`JobOptions` from them, so each option is checked here, in one place.
A value Instatic cannot accept raises :class:`InvalidJobOption`, whose message says what is
wrong and how to fix it; the declaration helpers put the job's name in front
(``job 'name': problem``, see ``registry.job_error``).
"""

import enum
from dataclasses import dataclass, fields
from datetime import datetime, timedelta


class InvalidJobOption(ValueError):
    """A job option Instatic cannot accept; the message says how to fix it."""


class Missed(enum.StrEnum):
    """What to do with slots that passed while no scheduler ran (after downtime)."""

    SKIP = "skip"  # run only a slot that is still on time; record the rest as missed
    # Run every slot that is merely late (within INSTATIC_MISFIRE_GRACE); after longer downtime
    # run the most recent slot once and record the older ones as missed.
    LATEST = "latest"
    ALL = "all"  # run every missed slot within ``missed_window``, oldest first


class RunOn(enum.StrEnum):
    """Where a job's runs execute."""

    LEADER = "leader"  # in the leading scheduler's own threads (the publishing jobs)
    # On a worker process of any replica, through Django's tasks interface; the leader plans
    # and claims the slot (docs/architecture.md, "Workers").
    WORKERS = "workers"


#: The longest wait before retrying a failed run, however many attempts came before.
MAX_RETRY_DELAY = timedelta(hours=1)

#: How many more times a failed slot may be tried, at the most.
MAX_RETRIES = 100


def _seconds(value):
    """Return a number of seconds as a ``timedelta``; anything else as it is."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    return value


def _whole_number(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class JobOptions:
    """The options of one job, checked when built (see the module docstring).

    ``max_duration`` and ``retry_backoff`` also take a number of seconds, ``missed`` its
    policy's name; the attributes always hold a :class:`Missed` and ``timedelta`` values.
    """

    #: What to do with slots that passed while no scheduler ran.
    missed: Missed = Missed.LATEST
    #: How far back ``missed="all"`` catches up (required for it).
    missed_window: timedelta | None = None
    #: Run in one transaction with the run's ledger row (else claim the run first).
    transactional: bool = False
    #: Run a claim-first slot again when its node died mid-run.
    retry_abandoned: bool = False
    #: Past it a run is recorded ``timed_out`` and told to stop.
    max_duration: timedelta | None = None
    #: How many more times a failed slot is tried.
    retries: int = 0
    #: The wait before the first retry; it doubles per attempt, up to ``MAX_RETRY_DELAY``.
    retry_backoff: timedelta = timedelta(seconds=30)
    #: Where the runs execute: in the leader (default) or on worker processes.
    run_on: RunOn = RunOn.LEADER
    #: The job sends to the world outside (webhooks, emails): its runs go after every other
    #: job's, and it yields while posts are going out (``coordination.priorities``).
    side_effects: bool = False

    def __post_init__(self):
        try:
            object.__setattr__(self, "run_on", RunOn(self.run_on))
        except ValueError:
            raise InvalidJobOption(
                f"run_on={self.run_on!r} is not a place to run; use one of "
                f"{', '.join(r.value for r in RunOn)}."
            ) from None
        try:
            missed = Missed(self.missed)
        except ValueError:
            raise InvalidJobOption(
                f"missed={self.missed!r} is not a policy; use one of "
                f"{', '.join(m.value for m in Missed)}."
            ) from None
        object.__setattr__(self, "missed", missed)
        if self.missed_window is not None and not isinstance(self.missed_window, timedelta):
            raise InvalidJobOption(
                f"missed_window={self.missed_window!r} must be a timedelta, e.g. "
                "missed_window=timedelta(hours=2)."
            )
        if missed is Missed.ALL and (
            self.missed_window is None or self.missed_window <= timedelta(0)
        ):
            raise InvalidJobOption(
                "missed='all' needs missed_window=timedelta(...) to bound how far back to catch up."
            )
        max_duration = _seconds(self.max_duration)
        if max_duration is not None and not isinstance(max_duration, timedelta):
            raise InvalidJobOption(
                f"max_duration={self.max_duration!r} must be a timedelta or a number of seconds."
            )
        if max_duration is not None and max_duration <= timedelta(0):
            raise InvalidJobOption("max_duration must be positive.")
        object.__setattr__(self, "max_duration", max_duration)
        if not _whole_number(self.retries) or not 0 <= self.retries <= MAX_RETRIES:
            raise InvalidJobOption(
                f"retries={self.retries!r} must be a whole number from 0 to {MAX_RETRIES}."
            )
        retry_backoff = _seconds(self.retry_backoff)
        if not isinstance(retry_backoff, timedelta) or retry_backoff <= timedelta(0):
            raise InvalidJobOption(
                "retry_backoff must be a positive timedelta or number of seconds."
            )
        object.__setattr__(self, "retry_backoff", retry_backoff)
        if self.transactional and self.retry_abandoned:
            raise InvalidJobOption(
                "retry_abandoned only applies to non-transactional jobs; a "
                "transactional job's crashed run rolls back and runs again by itself."
            )

    @classmethod
    def from_keywords(cls, options: dict) -> "JobOptions":
        """Return the options given as a declaration's keyword arguments.

        A keyword that is no option raises :class:`InvalidJobOption` naming the options.
        """
        unknown = sorted(set(options) - set(OPTION_NAMES))
        if unknown:
            what = "is not a job option" if len(unknown) == 1 else "are not job options"
            raise InvalidJobOption(
                f"{', '.join(unknown)} {what}; the options are {', '.join(OPTION_NAMES)}."
            )
        return cls(**options)

    def retry_at(self, attempt: int, now: datetime) -> datetime | None:
        """When a slot whose attempt ``attempt`` (from 1) failed is tried again, or ``None``.

        ``retry_backoff`` after the first failure, doubling with each attempt, at most
        ``MAX_RETRY_DELAY``; ``None`` once the ``retries`` are used up.
        """
        if attempt > self.retries:
            return None
        return now + min(self.retry_backoff * 2 ** (attempt - 1), MAX_RETRY_DELAY)


#: The keyword arguments a job declaration takes for its options, in declaration order.
OPTION_NAMES = tuple(f.name for f in fields(JobOptions))
