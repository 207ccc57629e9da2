"""How a plugin job's declaration becomes a registered :class:`Job`: its name checked and
made ``<plugin>.<name>``, its schedule helper's error kept for the declaration during
discovery, its registration (or, during discovery, its error recorded).

Below the SDK's decorators (``sdk.plugin_job``, ``subscribers.on_post_event``), which both
build their jobs here.
"""

import functools
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.apps import apps

from coordination.conf import settings
from coordination.registry import (
    Job,
    JobContext,
    JobDeclarationError,
    JobRegistry,
    declaration_failed,
    is_discovering,
    job_error,
    make_job,
)
from coordination.schedules import InvalidSchedule, Schedule
from plugins.models import PLUGIN_GROUP


class _InvalidSchedule:
    """What a schedule helper returns during discovery instead of raising: the error, kept
    until :func:`make_plugin_job` reports it against the job that uses it."""

    def __init__(self, error: InvalidSchedule):
        self.error = error

    def __repr__(self) -> str:
        return f"<invalid schedule: {self.error}>"


def deferred(helper: Callable[..., Schedule]) -> Callable[..., Schedule]:
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
