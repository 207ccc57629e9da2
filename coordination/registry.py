"""Job declarations: the registry every app's ``jobs.py`` adds to, and the groups jobs run in.

A job is a function plus a name, a group, a schedule and its policies. Declaring one with a bad
schedule (including one whose slots cannot be computed: see ``Schedule.verify``) or a name that
is already taken raises at once with a message that names both declarations. While
``autodiscover()`` imports the ``jobs.py`` modules it does not raise: one plugin's mistake must
not stop the web process from importing. Each bad declaration becomes one line in
``registry.errors`` naming its file and line, which ``manage.py check`` reports as
``coordination.E001`` and ``runscheduler`` refuses to start on; the good jobs still register.
"""

import logging
import re
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from django.apps import apps
from django.utils.module_loading import module_has_submodule

from coordination.job_options import MAX_RETRY_DELAY as MAX_RETRY_DELAY
from coordination.job_options import InvalidJobOption, JobOptions
from coordination.job_options import Missed as Missed
from coordination.job_options import RunOn as RunOn
from coordination.schedules import InvalidSchedule, Schedule, coerce

logger = logging.getLogger(__name__)

JOB_NAME_RE = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_\-]+)+$")


class JobDeclarationError(ValueError):
    """A job declaration Instatic cannot accept; the message says how to fix it."""


def job_error(name: str, problem: object) -> JobDeclarationError:
    """Return the error about the declaration of the job named ``name``: ``job 'name':
    problem``, the one form of every such message (the engine's checks and the plugin SDK's
    alike); a ``coordination.E001`` line puts the declaration's file and line in front."""
    return JobDeclarationError(f"job {name!r}: {problem}")


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
    """One declared job. Build it with :func:`job` or :func:`register_job`.

    Its options are one :class:`~coordination.job_options.JobOptions` (``job.options``), each
    also read as an attribute of the job (``job.missed``, ``job.retries``, ...).
    """

    name: str
    func: Callable[["JobContext"], Any]
    group: str
    schedule: Schedule
    options: JobOptions = JobOptions()
    source: str = ""

    @property
    def fingerprint(self) -> str:
        return self.schedule.fingerprint()

    @property
    def missed(self) -> Missed:
        return self.options.missed

    @property
    def missed_window(self) -> timedelta | None:
        return self.options.missed_window

    @property
    def transactional(self) -> bool:
        return self.options.transactional

    @property
    def retry_abandoned(self) -> bool:
        return self.options.retry_abandoned

    @property
    def max_duration(self) -> timedelta | None:
        return self.options.max_duration

    @property
    def retries(self) -> int:
        return self.options.retries

    @property
    def retry_backoff(self) -> timedelta:
        return self.options.retry_backoff

    @property
    def on_workers(self) -> bool:
        """True if the job's runs execute on worker processes, not in the leader."""
        return self.options.run_on is RunOn.WORKERS

    def retry_at(self, attempt: int, now: datetime) -> datetime | None:
        """When a slot whose attempt ``attempt`` (from 1) failed is tried again, or ``None``
        (see :meth:`JobOptions.retry_at <coordination.job_options.JobOptions.retry_at>`)."""
        return self.options.retry_at(attempt, now)


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
    **options,
) -> Job:
    """Validate a declaration and return the :class:`Job` (without registering it).

    ``options`` are the fields of :class:`~coordination.job_options.JobOptions`, as keyword
    arguments.
    """
    if not callable(func):
        raise job_error(name, f"{func!r} is not callable.")
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
        # The declaration's own clock: only to prove the slots compute, never to plan them.
        schedule.verify(now=datetime.now(UTC))
        options = JobOptions.from_keywords(options)
    except (InvalidSchedule, InvalidJobOption) as exc:
        raise job_error(name, exc) from None
    return Job(name=name, func=func, group=group, schedule=schedule, options=options, source=source)


def register_job(func: Callable, *, registry: JobRegistry = registry, **options) -> Job:
    """Declare ``func`` as a job (see :func:`make_job` for the options) and register it."""
    return registry.register(make_job(func, **options))


def job(*, registry: JobRegistry = registry, **options) -> Callable[[Callable], Callable]:
    """Decorator form of :func:`register_job`; returns the function unchanged.

    During discovery a bad declaration is recorded (see :func:`declaration_failed`) and the
    function is returned undeclared, so the rest of its ``jobs.py`` still registers.
    """

    def decorator(func: Callable) -> Callable:
        try:
            register_job(func, registry=registry, **options)
        except JobDeclarationError as exc:
            declaration_failed(exc, func, registry=registry)
        return func

    return decorator


# --- discovery ---------------------------------------------------------------------------------
_discovery = threading.local()


@contextmanager
def discovering() -> Iterator[None]:
    """Mark the ``jobs.py`` imports of :func:`autodiscover` (on this thread).

    Inside, declaration helpers record what is wrong instead of raising; outside (a test, a
    shell) they raise at once, which is what a person calling them wants.
    """
    previous = getattr(_discovery, "active", False)
    _discovery.active = True
    try:
        yield
    finally:
        _discovery.active = previous


def is_discovering() -> bool:
    """Return True while :func:`autodiscover` imports ``jobs.py`` modules on this thread."""
    return getattr(_discovery, "active", False)


def display_path(filename: str) -> str:
    """Return ``filename`` relative to the working directory when it is inside it."""
    path = Path(filename)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (OSError, ValueError):
        return str(path)


def location_of(func: Callable) -> str:
    """Return ``file:line`` where ``func`` is declared (its first decorator's line)."""
    code = getattr(func, "__code__", None)
    if code is not None:
        return f"{display_path(code.co_filename)}:{code.co_firstlineno}"
    module = import_module(func.__module__) if func.__module__ else None
    return display_path(getattr(module, "__file__", None) or repr(func))


def declaration_failed(
    exc: JobDeclarationError, func: Callable, *, registry: JobRegistry = registry
) -> None:
    """Record ``exc`` for ``func`` while discovering; re-raise it otherwise."""
    if not is_discovering():
        raise exc
    registry.errors.append(f"{location_of(func)}: {exc} (this job is not scheduled)")


def import_failure(module: str, exc: BaseException) -> str:
    """Return the one line that says where and why importing ``module`` failed."""
    spec = find_spec(module)
    filename = spec.origin if spec is not None else None
    where = display_path(filename) if filename else module
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{display_path(exc.filename)}:{exc.lineno}"
    else:
        frames = traceback.extract_tb(exc.__traceback__)
        lines = [frame.lineno for frame in frames if frame.filename == filename]
        if lines:
            where = f"{where}:{lines[-1]}"
    if isinstance(exc, JobDeclarationError | InvalidSchedule | InvalidJobOption):
        problem = str(exc)
    else:
        problem = f"{type(exc).__name__}: {exc}"
    return (
        f"{where}: {problem} (importing {module} stopped here: no job from this line on is "
        "scheduled)"
    )


def autodiscover() -> None:
    """Import every installed app's ``jobs`` module, collecting declaration errors.

    Like the admin's autodiscovery, but nothing a ``jobs.py`` does can stop the process from
    starting: each bad declaration (or a module that fails to import) becomes one line in
    ``registry.errors`` naming its file, for the system check (``coordination.E001``) and
    ``runscheduler``'s refusal to report; the web process logs them once
    (:func:`log_declaration_errors`) and serves on.
    """
    with discovering():
        for app_config in apps.get_app_configs():
            if not module_has_submodule(app_config.module, "jobs"):
                continue
            module = f"{app_config.name}.jobs"
            try:
                import_module(module)
            except Exception as exc:
                registry.errors.append(import_failure(module, exc))
                logger.debug("importing %s failed", module, exc_info=True)


def log_declaration_errors() -> None:
    """Log the bad declarations once, in one line: for the web process, where no system check
    runs (management commands report them through ``coordination.E001`` instead)."""
    if registry.errors:
        logger.error(
            "%d invalid job declaration(s) are not scheduled (manage.py check lists them): %s",
            len(registry.errors),
            "; ".join(registry.errors),
        )
