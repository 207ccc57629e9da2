"""The plugin SDK: declare periodic jobs from a plugin app's ``jobs.py``.

A plugin is a Django app. Its ``jobs.py`` declares jobs with :func:`plugin_job`::

    from datetime import timedelta

    from plugins.sdk import JobContext, daily, plugin_job


    @plugin_job(schedule=daily(at="03:30", tz="Europe/Berlin"), max_duration=timedelta(minutes=5))
    def send_digest(ctx: JobContext) -> None:
        for user in subscribers():
            if ctx.should_stop():
                return
            send_to(user, since=ctx.slot)

The job is named ``<plugin>.<function name>`` (here ``myplugin.send_digest``), runs in the
``plugins`` scheduler group (its own leader lock and loop, so it never delays publishing) and
is discovered at start-up like admin modules are. See ``docs/plugins.md`` for the policies and
for testing jobs with pytest-django.

Disabling a plugin pauses its jobs (see :mod:`plugins.services`); as a second line of defence
the plugin group's leader checks once a tick, before it starts runs, that their plugins are
enabled, and records the runs of a disabled plugin failed (``PluginDisabled``) instead.

A bad declaration raises :class:`JobDeclarationError` (or ``InvalidSchedule`` from a schedule
helper) at once, except while ``jobs.py`` modules are being discovered at start-up: there the
schedule helpers and :func:`plugin_job` record the problem against the declaration's file and
line (system check ``coordination.E001``) and leave that one job out, so every mistake in a file
is reported at once and the web process still starts.
"""

import functools
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.apps import apps

from coordination import schedules
from coordination.conf import settings
from coordination.registry import (
    Job,
    JobContext,
    JobDeclarationError,
    JobRegistry,
    Missed,
    declaration_failed,
    is_discovering,
    job_error,
    make_job,
)
from coordination.registry import registry as default_registry
from coordination.schedules import InvalidSchedule, Schedule
from plugins.exceptions import PluginDisabled
from plugins.models import PLUGIN_GROUP

__all__ = [
    "PLUGIN_GROUP",
    "Job",
    "JobContext",
    "JobDeclarationError",
    "Missed",
    "PluginDisabled",
    "cron",
    "daily",
    "every",
    "every_minutes",
    "hourly",
    "make_plugin_job",
    "monthly",
    "on_post_event",
    "plugin_job",
    "weekly",
]


class _InvalidSchedule:
    """What a schedule helper returns during discovery instead of raising: the error, kept
    until :func:`make_plugin_job` reports it against the job that uses it."""

    def __init__(self, error: InvalidSchedule):
        self.error = error

    def __repr__(self) -> str:
        return f"<invalid schedule: {self.error}>"


def _deferred(helper: Callable[..., Schedule]) -> Callable[..., Schedule]:
    """Wrap a schedule helper so that during discovery its error waits for the declaration."""

    @functools.wraps(helper)
    def build(*args, **kwargs):
        try:
            return helper(*args, **kwargs)
        except InvalidSchedule as exc:
            if not is_discovering():
                raise
            return _InvalidSchedule(exc)

    return build


cron = _deferred(schedules.cron)
daily = _deferred(schedules.daily)
every = _deferred(schedules.every)
every_minutes = _deferred(schedules.every_minutes)
hourly = _deferred(schedules.hourly)
monthly = _deferred(schedules.monthly)
weekly = _deferred(schedules.weekly)

_PLUGIN_RE = re.compile(r"^[a-z0-9_]+$")
_JOB_RE = re.compile(r"^[a-z0-9_][a-z0-9_\-]*$")


def _source(func: Callable) -> str:
    """Return ``module.qualname`` of a function or callable object (as the registry names it)."""
    qualname = getattr(func, "__qualname__", type(func).__qualname__)
    return f"{func.__module__}.{qualname}"


def _plugin_of(func: Callable, plugin: str | None) -> str:
    """Return the plugin name: ``plugin`` if given, else the label of the app around ``func``."""
    if plugin is None:
        app_config = apps.get_containing_app_config(func.__module__)
        if app_config is None:
            raise JobDeclarationError(
                f"plugin job {_source(func)} is not inside an installed "
                "app; declare it in an installed app's jobs.py, or pass plugin='name'."
            )
        plugin = app_config.label
    if not _PLUGIN_RE.match(plugin):
        raise JobDeclarationError(
            f"plugin name {plugin!r} (for {_source(func)}) must be "
            "lower-case letters, digits and underscores; pass plugin='name' to choose one."
        )
    return plugin


def make_plugin_job(
    func: Callable[[JobContext], Any],
    *,
    schedule: Schedule | timedelta,
    name: str | None = None,
    plugin: str | None = None,
    **options,
) -> Job:
    """Validate a plugin job declaration and return its :class:`Job`, without registering it.

    ``name`` is the part after the plugin's name (default: the function's name); ``plugin``
    defaults to the label of the app the function is in. See :func:`plugin_job` for the
    ``options``.
    """
    plugin = _plugin_of(func, plugin)
    short = name if name is not None else getattr(func, "__name__", "")
    if not _JOB_RE.match(short or ""):
        raise JobDeclarationError(
            f"job name {short!r} (declared by {_source(func)}) "
            "must be one lower-case word (letters, digits, _ and -); the plugin's name is "
            f"added in front: {plugin}.<name>."
        )
    if isinstance(schedule, _InvalidSchedule):
        raise job_error(f"{plugin}.{short}", schedule.error)
    options.setdefault("run_on", settings.PLUGIN_JOBS_RUN_ON)
    return make_job(
        func, name=f"{plugin}.{short}", schedule=schedule, group=PLUGIN_GROUP, **options
    )


def plugin_job(
    *,
    schedule: Schedule | timedelta,
    name: str | None = None,
    plugin: str | None = None,
    registry: JobRegistry = default_registry,
    **options,
) -> Callable[[Callable], Callable]:
    """Declare the decorated function as a plugin job named ``<plugin>.<name>``.

    - ``schedule``: :func:`every`, :func:`every_minutes`, :func:`hourly`, :func:`daily`,
      :func:`weekly`, :func:`monthly`, :func:`cron` (with a time zone), or a ``timedelta``.

    The options (:class:`~coordination.job_options.JobOptions`, checked there):

    - ``missed``: what to do with slots that passed while no scheduler ran: ``"latest"``
      (default: run the newest once), ``"skip"`` or ``"all"`` (needs ``missed_window``).
      Slots not run are recorded as ``missed`` in the run ledger.
    - ``transactional``: run inside one transaction with the run's ledger row (exactly once:
      a crash rolls both back and the slot runs again). Otherwise the run is claimed first,
      then the job runs (at most once; a run whose node died is recorded ``abandoned`` and
      run again only with ``retry_abandoned=True``).
    - ``max_duration`` (a ``timedelta`` or seconds): past it the run is recorded
      ``timed_out`` and ``ctx.should_stop()`` turns true; the job is not started again while
      it still runs.
    - ``run_on``: ``"leader"`` (run in the leading scheduler's threads) or ``"workers"``
      (run on a worker process of any replica; the leader still plans and claims each slot,
      so it runs once all the same). Default: ``INSTATIC_PLUGIN_JOBS_RUN_ON``. Put a job on
      workers when it runs for more than a few seconds or uses the CPU.
    - ``retries``: how many more times a failed run of a slot is tried (default 0), after
      ``retry_backoff`` (a ``timedelta`` or seconds; default 30 s), doubling each attempt up
      to an hour. Attempts of a slot are one ledger row (its ``attempt`` counts them), so
      a slot still runs at most once successfully.

    The function is returned unchanged (call it directly in tests); its declared
    :class:`Job` is available as ``func.job``. A name already taken raises
    :class:`JobDeclarationError` naming both declarations; during start-up discovery the error
    is recorded instead (``coordination.E001``) and the function is returned undeclared.
    """

    def decorator(func: Callable) -> Callable:
        return declare(
            func,
            lambda: make_plugin_job(func, schedule=schedule, name=name, plugin=plugin, **options),
            registry=registry,
        )

    return decorator


def declare(func: Callable, build: Callable[[], Job], *, registry: JobRegistry) -> Callable:
    """Register the job ``build()`` returns for ``func`` and return ``func`` with it as
    ``func.job``; a bad declaration raises, or during discovery is recorded and ``func``
    returned undeclared (the decorators' common end)."""
    try:
        job = build()
        registry.register(job)
    except JobDeclarationError as exc:
        declaration_failed(exc, func, registry=registry)
        return func
    func.job = job
    return func


# Subscribers are plugin jobs too; imported last, as it builds its jobs with make_plugin_job.
from plugins.subscribers import on_post_event  # noqa: E402
