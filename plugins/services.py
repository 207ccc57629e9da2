"""Control of plugins and scheduled jobs: one code path for the admin, ``manage.py jobs``,
tests and the shell.

Every action records a :class:`ControlEvent` (who, what, when) in the same transaction as the
change, and goes through :mod:`coordination.services`, so the scheduler's leader sees it at
once (woken by ``NOTIFY`` on PostgreSQL, at its next tick elsewhere). Job controls work on the
jobs of every group; only plugin jobs also answer to their plugin being disabled. Who acted is
a Django user (the admin) or, from the command line, the operating-system user (``actor``).
"""

import getpass
import logging
import socket

from django.db import transaction
from django.db.models.functions import Now

from coordination import ledger
from coordination import services as coordination
from coordination.clock import database_now
from coordination.models import JobRun, JobState
from coordination.registry import registry
from plugins import selectors
from plugins.exceptions import ControlError, PluginDisabled
from plugins.models import PLUGIN_GROUP, ControlEvent, PluginState

logger = logging.getLogger(__name__)

#: The pause reason of jobs paused because their plugin is disabled; enabling the plugin
#: resumes exactly these, and leaves jobs paused for other reasons (an operator, the failure
#: cap) paused.
PLUGIN_DISABLED_REASON = JobRun.MissedReason.PLUGIN_DISABLED.value

A = ControlEvent.Action


def _username(user, actor: str = "") -> str:
    if actor:
        return actor[:150]
    return user.get_username() if user is not None else ""


def os_actor() -> str:
    """Who runs a management command: the operating-system user and host, for the audit."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = "unknown"
    return f"{name}@{socket.gethostname()} (shell)"


def _record(user, action: str, target: str, detail: str = "", *, actor: str = "") -> ControlEvent:
    return ControlEvent.objects.create(
        user=user if user is not None and user.pk else None,
        username=_username(user, actor),
        action=action,
        target=target,
        detail=detail[:255],
    )


def _job(job_name: str, *, create_declared: bool = False) -> JobState:
    """Return the job's state; with ``create_declared``, first create the state of a job this
    process declares that no scheduler has started yet (a fresh database, a new release)."""
    state = JobState.objects.filter(name=job_name).first()
    declared = registry.get(job_name) if state is None and create_declared else None
    if declared is not None:
        # The engine's own constructor of job states, so the first slot is computed its way.
        ledger.ensure_states([declared], {}, database_now())
        state = JobState.objects.filter(name=job_name).first()
    if state is None:
        raise ControlError(
            f"{job_name} is not a job the scheduler knows (yet): see `manage.py jobs list`."
        )
    return state


def _disabled_plugin(state: JobState) -> str | None:
    """The plugin a plugin job belongs to when that plugin is disabled, else ``None``."""
    if state.group != PLUGIN_GROUP:
        return None
    plugin = selectors.plugin_of(state.name)
    return None if selectors.plugin_enabled(plugin) else plugin


def sync_plugins() -> int:
    """Create the missing :class:`PluginState` rows (enabled) for every known plugin."""
    existing = set(PluginState.objects.values_list("app_label", flat=True))
    missing = [name for name in selectors.known_plugins() if name not in existing]
    PluginState.objects.bulk_create(
        [PluginState(app_label=name) for name in missing], ignore_conflicts=True
    )
    return len(missing)


def set_plugin_enabled(*, plugin: str, enabled: bool, user) -> int:
    """Enable or disable a whole plugin; return how many of its jobs were resumed or paused.

    Disabling pauses every job of the plugin that is not paused already, with the reason
    :data:`PLUGIN_DISABLED_REASON`, and first creates the (paused) state of jobs this process
    declares that the scheduler has not seen yet, so they never get a chance to run. Enabling
    resumes only the jobs paused for that reason.
    """
    with transaction.atomic():
        PluginState.objects.update_or_create(
            app_label=plugin,
            defaults={"enabled": enabled, "changed_by": user, "changed_at": Now()},
        )
        if enabled:
            names = list(
                selectors.plugin_job_states(plugin)
                .filter(paused=True, paused_reason=PLUGIN_DISABLED_REASON)
                .values_list("name", flat=True)
            )
            for name in names:
                coordination.set_paused(name, False)
        else:
            _create_missing_states(plugin)
            names = list(
                selectors.plugin_job_states(plugin)
                .filter(paused=False)
                .values_list("name", flat=True)
            )
            for name in names:
                coordination.set_paused(name, True, reason=PLUGIN_DISABLED_REASON)
        action = A.PLUGIN_ENABLED if enabled else A.PLUGIN_DISABLED
        verb = "resumed" if enabled else "paused"
        _record(user, action, plugin, f"{verb} {len(names)} job(s): {', '.join(names)}")
    logger.info(
        "plugin %s %s by %s (%d job(s) %s)",
        plugin,
        "enabled" if enabled else "disabled",
        _username(user) or "unknown",
        len(names),
        verb,
    )
    return len(names)


def _create_missing_states(plugin: str) -> None:
    jobs = selectors.declared_plugin_jobs().get(plugin, [])
    known = set(selectors.plugin_job_states(plugin).values_list("name", flat=True))
    missing = [job for job in jobs if job.name not in known]
    if missing:
        # The engine's own constructor of job states, so the next slot is computed its way.
        ledger.ensure_states(missing, {}, database_now())


def refuse_runs_of_disabled_plugins(sender=None, *, group: str, jobs, **kwargs) -> dict:
    """Refuse the runs a plugin group's leader is about to start whose plugin is disabled.

    Connected to :data:`coordination.loop.runs_starting`: one read of the disabled plugins a
    tick that starts runs, instead of one a run. Disabling a plugin pauses its jobs, which is
    what keeps them from running (a paused job's slots are never claimed); this covers what
    pausing cannot: a job first declared (by a deploy) after its plugin was disabled, or a run
    requested outside the admin. Each refused run is recorded failed with
    :class:`PluginDisabled` (a run that silently did nothing would be recorded ``succeeded``),
    and its job is paused first, so it does not happen again.
    """
    if group != PLUGIN_GROUP or not jobs:
        return {}
    disabled = selectors.disabled_plugins()
    if not disabled:
        return {}
    refused = {
        job.name: PluginDisabled(
            f"plugin {selectors.plugin_of(job.name)!r} is disabled, so {job.name} did not run; "
            "enable the plugin in the admin to run its jobs again"
        )
        for job in jobs
        if selectors.plugin_of(job.name) in disabled
    }
    if refused:
        pause_for_disabled_plugin(list(refused))
        logger.warning(
            "refusing %d run(s) of disabled plugins: %s", len(refused), ", ".join(sorted(refused))
        )
    return refused


def pause_for_disabled_plugin(job_names: list[str]) -> int:
    """Pause jobs whose plugin turned out to be disabled as they were about to run."""
    return ledger.pause_jobs(job_names, reason=PLUGIN_DISABLED_REASON)


def pause_job(*, job_name: str, user, reason: str = "", actor: str = "") -> None:
    """Pause a job: it keeps its state and history but its slots are not run.

    A job this process declares that no scheduler has started yet gets its state now, paused
    (in the same transaction), so the scheduler's first tick finds it paused.
    """
    reason = reason or f"paused by {_username(user, actor) or 'an operator'}"
    with transaction.atomic():
        state = _job(job_name, create_declared=True)
        coordination.set_paused(state.name, True, reason=reason)
        _record(user, A.JOB_PAUSED, state.name, reason, actor=actor)


def resume_job(*, job_name: str, user, actor: str = "") -> None:
    """Resume a paused job (this also clears its failure streak)."""
    state = _job(job_name)
    plugin = _disabled_plugin(state)
    if plugin is not None:
        raise ControlError(
            f"{state.name} stays paused while its plugin {plugin!r} is disabled; "
            "enable the plugin instead."
        )
    try:
        with transaction.atomic():
            coordination.set_paused(state.name, False)
            _record(user, A.JOB_RESUMED, state.name, _resumed_detail(state), actor=actor)
    except coordination.CannotPlan as exc:
        raise ControlError(str(exc)) from None


def _resumed_detail(state: JobState) -> str:
    return f"was: {state.paused_reason}" if state.paused else "was not paused"


def run_job_now(*, job_name: str, user, actor: str = "") -> None:
    """Ask the leader to run a job now, even if paused (recorded as a manual run)."""
    state = _job(job_name)
    if state.retired_at is not None:
        raise ControlError(f"{state.name} is retired: no running node declares it any more.")
    plugin = _disabled_plugin(state)
    if plugin is not None:
        raise ControlError(
            f"{state.name} cannot run while its plugin {plugin!r} is disabled; "
            "enable the plugin first."
        )
    with transaction.atomic():
        if not coordination.request_run(state.name, requested_by=_username(user, actor)):
            raise ControlError(f"{state.name} no longer exists.")
        _record(user, A.JOB_RUN_REQUESTED, state.name, actor=actor)
