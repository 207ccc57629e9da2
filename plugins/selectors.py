"""Reads of plugin and plugin job state, for the admin, the services and the job guard."""

from dataclasses import dataclass, field

from coordination.conf import settings as coordination_settings
from coordination.models import JobState, Node
from coordination.registry import Job, registry
from coordination.selectors import live_schedulers_q
from plugins.models import PLUGIN_GROUP, PluginState


def plugin_of(job_name: str) -> str:
    """Return the plugin a job belongs to: the part of its name before the first dot."""
    return job_name.split(".", 1)[0]


def declared_plugin_jobs() -> dict[str, list[Job]]:
    """Return the plugin jobs this process declares, by plugin, names sorted."""
    plugins: dict[str, list[Job]] = {}
    for job in registry.for_group(PLUGIN_GROUP):
        plugins.setdefault(plugin_of(job.name), []).append(job)
    return plugins


def known_plugins() -> list[str]:
    """Return every plugin this process declares or the database knows about, sorted."""
    names = set(declared_plugin_jobs())
    names.update(
        plugin_of(name)
        for name in JobState.objects.filter(group=PLUGIN_GROUP).values_list("name", flat=True)
    )
    names.update(PluginState.objects.values_list("app_label", flat=True))
    return sorted(names)


def plugin_enabled(plugin: str) -> bool:
    """Return False only if the plugin was disabled (a plugin without a row is enabled)."""
    return not PluginState.objects.filter(app_label=plugin, enabled=False).exists()


def disabled_plugins() -> set[str]:
    return set(PluginState.objects.filter(enabled=False).values_list("app_label", flat=True))


def plugin_job_states(plugin: str):
    """Return the job states of ``plugin``'s jobs (by name prefix, whoever declared them)."""
    return JobState.objects.filter(group=PLUGIN_GROUP, name__startswith=f"{plugin}.")


def is_auto_paused(state: JobState) -> bool:
    """Return True if the job paused itself after too many failures in a row.

    The engine pauses with the reason ``paused after N failures in a row``; an operator's
    pause or a disabled plugin gives another reason.
    """
    return state.paused and state.paused_reason.endswith("failures in a row")


def auto_paused_jobs() -> list[JobState]:
    return [
        state
        for state in JobState.objects.filter(group=PLUGIN_GROUP, paused=True)
        if is_auto_paused(state)
    ]


@dataclass
class NodeJobs:
    """A live node's declared jobs compared with what the other live nodes declare."""

    name: str
    fingerprint: str
    declared: set[str]
    extra: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


@dataclass
class Deployment:
    """What the live scheduler nodes declare; ``differs`` during a rolling deploy."""

    nodes: list[NodeJobs]

    @property
    def differs(self) -> bool:
        return len({node.fingerprint for node in self.nodes}) > 1

    def declared_by(self, job_name: str) -> list[str]:
        return [node.name for node in self.nodes if job_name in node.declared]

    def differing_nodes(self) -> list[NodeJobs]:
        return [node for node in self.nodes if node.extra or node.missing] if self.differs else []


def deployment() -> Deployment:
    """Return the live nodes' declared job sets and how each differs from the others.

    A job is *extra* on a node when some live node does not declare it, and *missing* on a node
    that does not declare a job another live node does. Fingerprints also cover schedules, so
    nodes can differ with no extra or missing job (a changed schedule).
    """
    rows = Node.objects.filter(live_schedulers_q()).values_list(
        "name", "jobs_fingerprint", "declared_jobs"
    )
    nodes = [NodeJobs(name, fp, set(declared or [])) for name, fp, declared in rows]
    if len({node.fingerprint for node in nodes}) > 1:
        union = set().union(*(node.declared for node in nodes))
        common = set.intersection(*(node.declared for node in nodes))
        for node in nodes:
            node.extra = sorted(node.declared - common)
            node.missing = sorted(union - node.declared)
    return Deployment(nodes=nodes)


def failure_pause_threshold() -> int:
    return int(coordination_settings.FAILURE_PAUSE_THRESHOLD)
