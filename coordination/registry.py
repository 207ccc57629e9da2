"""Job declarations: the registry every app's ``jobs.py`` adds to, and the groups jobs run in.

A job is a function plus a name, a group, a schedule and its policies. Declaring one with a bad
schedule or a name that is already taken raises at once with a message that names both
declarations; ``autodiscover()`` collects such errors so ``manage.py check`` and
``runscheduler`` report them instead of crashing at import.
"""

import enum
import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import import_module
from typing import Any

from django.apps import apps
from django.utils.module_loading import module_has_submodule

from coordination.schedules import InvalidSchedule, Schedule, coerce

logger = logging.getLogger(__name__)

JOB_NAME_RE = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_\-]+)+$")


class JobDeclarationError(ValueError):
    """A job declaration Instatic cannot accept; the message says how to fix it."""


class Missed(enum.StrEnum):
    """What to do with slots that passed while no scheduler ran (after downtime)."""

    SKIP = "skip"  # run only a slot that is still on time; record the rest as missed
    # Run every slot that is merely late (within INSTATIC_MISFIRE_GRACE); after longer downtime
    # run the most recent slot once and record the older ones as missed.
    LATEST = "latest"
    ALL = "all"  # run every missed slot within ``missed_window``, oldest first


@dataclass(frozen=True)
class Group:
    """A set of jobs that share one leader lock and one loop thread."""

    name: str
    log_prefix: str
    running_text: str

    @property
    def channel(self) -> str:
        """The PostgreSQL ``LISTEN`` channel that wakes this group's leader."""
        return f"instatic_wakeup_{self.name}"


BUILTIN_GROUPS = {
    "publishing": Group("publishing", "publish-scheduler", "running scheduled publish…"),
    "plugins": Group("plugins", "plugin-scheduler", "running plugin jobs…"),
}


def group(name: str) -> Group:
    """Return the group called ``name`` (a custom group gets its own lock and loop)."""
    return BUILTIN_GROUPS.get(name) or Group(name, f"{name}-scheduler", f"running {name} jobs…")


@dataclass(frozen=True)
class Job:
    """One declared job. Build it with :func:`job` or :func:`register_job`."""

    name: str
    func: Callable[["JobContext"], Any]
    group: str
    schedule: Schedule
    missed: Missed = Missed.LATEST
    missed_window: timedelta | None = None
    transactional: bool = False
    retry_abandoned: bool = False
    max_duration: timedelta | None = None
    source: str = ""

    @property
    def fingerprint(self) -> str:
        return self.schedule.fingerprint()


@dataclass
class JobContext:
    """What a running job gets: its slot, node, logger, deadline and a stop flag to poll."""

    job: Job
    slot: datetime
    node: str
    logger: logging.Logger
    deadline: datetime | None
    trigger: str = "schedule"
    _stop: Callable[[], bool] = field(default=lambda: False, repr=False)

    def should_stop(self) -> bool:
        """Return True when the job should wrap up: shutdown, lost lock or past its deadline."""
        return self._stop()


class JobRegistry:
    """Name → :class:`Job`, plus the declaration errors found while discovering ``jobs.py``."""

    def __init__(self):
        self._jobs: dict[str, Job] = {}
        self.errors: list[str] = []
        self._lock = threading.RLock()

    def register(self, job: Job) -> Job:
        with self._lock:
            existing = self._jobs.get(job.name)
            if existing is not None and existing.source != job.source:
                raise JobDeclarationError(
                    f"job name {job.name!r} is declared twice: by {existing.source} and by "
                    f"{job.source}. Rename one of them (plugin jobs are named <plugin>.<job>)."
                )
            self._jobs[job.name] = job
        return job

    def unregister(self, name: str) -> None:
        with self._lock:
            self._jobs.pop(name, None)

    def get(self, name: str) -> Job | None:
        return self._jobs.get(name)

    def all(self) -> list[Job]:
        return sorted(self._jobs.values(), key=lambda j: j.name)

    def for_group(self, group_name: str) -> list[Job]:
        return [j for j in self.all() if j.group == group_name]

    def groups(self) -> list[str]:
        return sorted({j.group for j in self._jobs.values()} | set(BUILTIN_GROUPS))

    @contextmanager
    def temporary(self, *jobs: Job, replace: bool = False) -> Iterator["JobRegistry"]:
        """Register ``jobs`` for the duration of a ``with`` block (tests); restore afterwards.

        With ``replace=True`` only ``jobs`` are registered inside the block.
        """
        with self._lock:
            saved_jobs, saved_errors = dict(self._jobs), list(self.errors)
            if replace:
                self._jobs = {}
            try:
                for job in jobs:
                    self.register(job)
            except BaseException:
                self._jobs, self.errors = saved_jobs, saved_errors
                raise
        try:
            yield self
        finally:
            with self._lock:
                self._jobs, self.errors = saved_jobs, saved_errors


registry = JobRegistry()


def make_job(
    func: Callable,
    *,
    name: str | None = None,
    schedule: Schedule | timedelta,
    group: str = "plugins",
    missed: Missed | str = Missed.LATEST,
    missed_window: timedelta | None = None,
    transactional: bool = False,
    retry_abandoned: bool = False,
    max_duration: timedelta | None = None,
) -> Job:
    """Validate a declaration and return the :class:`Job` (without registering it)."""
    if not callable(func):
        raise JobDeclarationError(f"job {name!r}: {func!r} is not callable.")
    qualname = getattr(func, "__qualname__", type(func).__qualname__)
    source = f"{func.__module__}.{qualname}"
    name = name or f"{func.__module__.rsplit('.', 1)[0]}.{qualname.rsplit('.', 1)[-1]}"
    if not JOB_NAME_RE.match(name):
        raise JobDeclarationError(
            f"job name {name!r} (declared by {source}) must be dotted lower-case words, "
            "e.g. 'myplugin.send_digest'."
        )
    try:
        schedule = coerce(schedule)
    except InvalidSchedule as exc:
        raise JobDeclarationError(f"job {name!r} (declared by {source}): {exc}") from None
    try:
        missed = Missed(missed)
    except ValueError:
        raise JobDeclarationError(
            f"job {name!r}: missed={missed!r} is not a policy; use one of "
            f"{', '.join(m.value for m in Missed)}."
        ) from None
    if missed is Missed.ALL and (missed_window is None or missed_window <= timedelta(0)):
        raise JobDeclarationError(
            f"job {name!r}: missed='all' needs missed_window=timedelta(...) to bound how far "
            "back to catch up."
        )
    if max_duration is not None and max_duration <= timedelta(0):
        raise JobDeclarationError(f"job {name!r}: max_duration must be positive.")
    if transactional and retry_abandoned:
        raise JobDeclarationError(
            f"job {name!r}: retry_abandoned only applies to non-transactional jobs; a "
            "transactional job's crashed run rolls back and runs again by itself."
        )
    return Job(
        name=name,
        func=func,
        group=group,
        schedule=schedule,
        missed=missed,
        missed_window=missed_window,
        transactional=transactional,
        retry_abandoned=retry_abandoned,
        max_duration=max_duration,
        source=source,
    )


def register_job(func: Callable, *, registry: JobRegistry = registry, **options) -> Job:
    """Declare ``func`` as a job (see :func:`make_job` for the options) and register it."""
    return registry.register(make_job(func, **options))


def job(*, registry: JobRegistry = registry, **options) -> Callable[[Callable], Callable]:
    """Decorator form of :func:`register_job`; returns the function unchanged."""

    def decorator(func: Callable) -> Callable:
        register_job(func, registry=registry, **options)
        return func

    return decorator


def autodiscover() -> None:
    """Import every installed app's ``jobs`` module, collecting declaration errors.

    Like the admin's autodiscovery, but one bad ``jobs.py`` does not hide the others: its error
    is kept in ``registry.errors`` for the system check (``coordination.E001``) to report.
    """
    for app_config in apps.get_app_configs():
        if not module_has_submodule(app_config.module, "jobs"):
            continue
        try:
            import_module(f"{app_config.name}.jobs")
        except JobDeclarationError as exc:
            registry.errors.append(str(exc))
            logger.error("invalid job declaration in %s.jobs: %s", app_config.name, exc)
