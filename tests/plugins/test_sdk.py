"""The plugin SDK: names, policies, declaration errors, discovery, and the example plugin."""

from datetime import timedelta

import pytest

import plugins.jobs
import plugins.sdk as sdk
from coordination.registry import JobRegistry, registry
from coordination.schedules import Cron, Every
from plugins.contrib.example import jobs as example_jobs
from plugins.contrib.example.models import Beat, Digest
from plugins.sdk import JobDeclarationError, Missed, make_plugin_job, plugin_job
from plugins.testing import context_for
from publishing.models import Post
from tests.publishing.conftest import make_post


def in_module(module: str):
    """Return a job function that looks as if it were defined in ``module``."""

    def send_digest(ctx):
        return None

    send_digest.__module__ = module
    return send_digest


def test_the_public_api_is_importable_from_one_module():
    for name in [
        "plugin_job",
        "every",
        "hourly",
        "daily",
        "weekly",
        "monthly",
        "every_minutes",
        "cron",
        "Missed",
        "JobContext",
    ]:
        assert hasattr(sdk, name), name


def test_a_job_is_named_after_its_app_label_and_function_and_runs_in_the_plugins_group():
    job = make_plugin_job(in_module("plugins.contrib.example.jobs"), schedule=sdk.hourly())
    assert job.name == "example.send_digest"
    assert job.group == "plugins"
    assert job.source == "plugins.contrib.example.jobs.in_module.<locals>.send_digest"


def test_name_and_plugin_can_be_chosen():
    func = in_module("plugins.contrib.example.jobs")
    assert make_plugin_job(func, name="weekly-digest", schedule=sdk.hourly()).name == (
        "example.weekly-digest"
    )
    assert make_plugin_job(func, plugin="news", schedule=sdk.hourly()).name == "news.send_digest"


def test_policies_are_passed_to_the_engine():
    job = make_plugin_job(
        in_module("plugins.contrib.example.jobs"),
        schedule=sdk.cron("*/15 8-18 * * mon-fri", tz="Europe/Berlin"),
        missed=Missed.ALL,
        missed_window=timedelta(hours=2),
        retry_abandoned=True,
        max_duration=90,
    )
    assert isinstance(job.schedule, Cron) and job.schedule.tz == "Europe/Berlin"
    assert job.missed is Missed.ALL and job.missed_window == timedelta(hours=2)
    assert job.retry_abandoned and not job.transactional
    assert job.max_duration == timedelta(seconds=90), "seconds are accepted"


@pytest.mark.parametrize(
    ("module", "options", "fragment"),
    [
        ("somewhere.else", {}, "not inside an installed app"),
        ("plugins.contrib.example.jobs", {"name": "two.parts"}, "one lower-case word"),
        ("plugins.contrib.example.jobs", {"name": "Upper"}, "one lower-case word"),
        ("plugins.contrib.example.jobs", {"plugin": "My-Plugin"}, "lower-case letters"),
        ("plugins.contrib.example.jobs", {"schedule": "daily"}, "is not a schedule"),
        ("plugins.contrib.example.jobs", {"max_duration": -1}, "must be positive"),
        ("plugins.contrib.example.jobs", {"missed": "all"}, "missed_window"),
    ],
)
def test_bad_declarations_say_what_is_wrong(module, options, fragment):
    options.setdefault("schedule", sdk.hourly())
    with pytest.raises(JobDeclarationError, match=fragment):
        make_plugin_job(in_module(module), **options)


def test_a_duplicate_name_is_an_error_naming_both_declarations():
    reg = JobRegistry()
    reg.register(example_jobs.beat.job)
    other = in_module("plugins.contrib.example.jobs")
    with pytest.raises(JobDeclarationError) as excinfo:
        plugin_job(name="beat", schedule=sdk.hourly(), registry=reg)(other)
    message = str(excinfo.value)
    assert "'example.beat' is declared twice" in message
    assert "plugins.contrib.example.jobs.beat" in message
    assert "in_module.<locals>.send_digest" in message


def test_the_decorator_registers_and_returns_the_function_unchanged():
    reg = JobRegistry()
    func = in_module("plugins.contrib.example.jobs")
    assert plugin_job(schedule=sdk.every_minutes(5), registry=reg)(func) is func
    assert reg.get("example.send_digest") is func.job
    assert isinstance(func.job.schedule, Every)


def test_the_example_and_built_in_plugins_are_discovered():
    jobs = {job.name: job for job in registry.for_group("plugins")}
    assert {"example.beat", "example.digest", "run_retention.prune"} <= set(jobs)
    # The static export is declared only when INSTATIC_EXPORT_ROOT names a folder. (Asked of
    # the discovered module: a test that imports the export module itself declares the job.)
    assert plugins.jobs.__all__ == ["retention"]
    assert jobs["example.beat"].transactional
    assert jobs["example.digest"].retry_abandoned
    assert jobs["example.digest"].max_duration == timedelta(minutes=5)
    assert jobs["run_retention.prune"].schedule.describe() == "hourly at :23 (UTC)"
    assert not registry.errors


@pytest.mark.django_db
def test_the_example_jobs_called_with_a_context():
    ctx = context_for(example_jobs.beat, node="node-a")
    example_jobs.beat(ctx)
    assert list(Beat.objects.values_list("slot", "node")) == [(ctx.slot, "node-a")]

    make_post(status=Post.Status.PUBLISHED, body="one two three")
    make_post(status=Post.Status.PUBLISHED, body="four five")
    make_post(status=Post.Status.DRAFT, body="not counted")
    ctx = context_for(example_jobs.digest)
    example_jobs.digest(ctx)
    example_jobs.digest(ctx)  # a retried slot overwrites, it does not add
    [digest] = Digest.objects.all()
    assert (digest.live_posts, digest.words, digest.complete) == (2, 5, True)

    stopped = context_for(example_jobs.digest, should_stop=lambda: True)
    example_jobs.digest(stopped)
    assert not Digest.objects.get(slot=stopped.slot).complete


# --- one form for every declaration error about a named job ---------------------------------


def _declared_in_plugin(func):
    func.__module__ = "plugins.contrib.example.jobs"
    return func


def _bad_cron(ctx):
    """A schedule helper's own error (the cron expression)."""


def _beyond_the_calendar(ctx):
    """The declaration's check of the slots (none before the end of the calendar)."""


def _bad_policy(ctx):
    """The job's options (missed='sometimes')."""


@pytest.mark.parametrize(
    ("func", "options", "name", "problem"),
    [
        (_bad_cron, {"schedule": "cron"}, "example.bad_cron", "cron '61 * * * *': minute"),
        (
            _beyond_the_calendar,
            {"schedule": "far"},
            "example.far",
            "every(timedelta(days=3000000)): no slot falls before the end of the calendar",
        ),
        (_bad_policy, {"missed": "sometimes"}, "example.policy", "missed='sometimes'"),
    ],
    ids=["schedule-helper", "declaration-check", "options"],
)
def test_every_error_about_a_named_job_starts_job_name_after_the_file_and_line(
    func, options, name, problem
):
    from coordination.registry import discovering, location_of

    func = _declared_in_plugin(func)
    reg = JobRegistry()
    short = name.split(".", 1)[1]
    with discovering():
        schedule = {
            "cron": sdk.cron("61 * * * *"),
            "far": sdk.every(timedelta(days=3_000_000)),
        }.get(options.pop("schedule", ""), sdk.hourly())
        sdk.plugin_job(schedule=schedule, name=short, registry=reg, **options)(func)
    [error] = reg.errors
    prefix = f"{location_of(func)}: job '{name}': "
    assert error.startswith(prefix), error
    assert error[len(prefix) :].startswith(problem), error
    assert error.endswith(" (this job is not scheduled)")
