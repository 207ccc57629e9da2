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

from collections.abc import Callable
from datetime import timedelta

from coordination import schedules
from coordination.registry import Job, JobContext, JobDeclarationError, JobRegistry, Missed
from coordination.registry import registry as default_registry
from coordination.schedules import Schedule
from plugins.declarations import declare, deferred, make_plugin_job
from plugins.exceptions import PluginDisabled
from plugins.models import PLUGIN_GROUP
from plugins.subscribers import on_post_event

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


cron = deferred(schedules.cron)
daily = deferred(schedules.daily)
every = deferred(schedules.every)
every_minutes = deferred(schedules.every_minutes)
hourly = deferred(schedules.hourly)
monthly = deferred(schedules.monthly)
weekly = deferred(schedules.weekly)


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
