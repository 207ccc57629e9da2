"""A job's options are checked in one place (``JobOptions``), with one clear error each.

The tables are what every declaration helper (``@job``, ``make_job``, ``@plugin_job``,
``make_plugin_job``) accepts and refuses; the last tests show that each of them goes through
``JobOptions`` and puts the job's name in front of the problem.
"""

from datetime import UTC, datetime, timedelta

import pytest

from coordination.job_options import (
    MAX_RETRY_DELAY,
    OPTION_NAMES,
    InvalidJobOption,
    JobOptions,
    Missed,
)
from coordination.registry import JobDeclarationError, JobRegistry, job, make_job
from coordination.schedules import every
from plugins.sdk import make_plugin_job, plugin_job

HOURLY = every(timedelta(hours=1))
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def noop(ctx):
    pass


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, {"missed": Missed.LATEST, "retries": 0, "retry_backoff": timedelta(seconds=30)}),
        ({"missed": "skip"}, {"missed": Missed.SKIP}),
        ({"missed": Missed.SKIP}, {"missed": Missed.SKIP}),
        (
            {"missed": "all", "missed_window": timedelta(hours=2)},
            {"missed": Missed.ALL, "missed_window": timedelta(hours=2)},
        ),
        ({"missed_window": timedelta(hours=2)}, {"missed_window": timedelta(hours=2)}),
        ({"max_duration": 90}, {"max_duration": timedelta(seconds=90)}),
        ({"max_duration": 0.5}, {"max_duration": timedelta(milliseconds=500)}),
        ({"max_duration": timedelta(minutes=5)}, {"max_duration": timedelta(minutes=5)}),
        ({"max_duration": None}, {"max_duration": None}),
        ({"retries": 0}, {"retries": 0}),
        ({"retries": 100}, {"retries": 100}),
        ({"retry_backoff": 10}, {"retry_backoff": timedelta(seconds=10)}),
        ({"retry_backoff": 0.25}, {"retry_backoff": timedelta(milliseconds=250)}),
        ({"retry_backoff": timedelta(minutes=1)}, {"retry_backoff": timedelta(minutes=1)}),
        ({"transactional": True}, {"transactional": True, "retry_abandoned": False}),
        ({"retry_abandoned": True}, {"transactional": False, "retry_abandoned": True}),
    ],
)
def test_accepted_options_and_what_they_become(given, expected):
    options = JobOptions(**given)
    for name, value in expected.items():
        assert getattr(options, name) == value, name
    assert type(options.missed) is Missed


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        (
            {"missed": "sometimes"},
            "missed='sometimes' is not a policy; use one of skip, latest, all.",
        ),
        ({"missed": None}, "missed=None is not a policy"),
        ({"missed": "all"}, "missed='all' needs missed_window=timedelta(...)"),
        ({"missed": "all", "missed_window": timedelta(0)}, "missed='all' needs missed_window"),
        (
            {"missed": "all", "missed_window": -timedelta(hours=1)},
            "missed='all' needs missed_window",
        ),
        ({"missed_window": "2h"}, "missed_window='2h' must be a timedelta"),
        ({"missed": "all", "missed_window": 7200}, "missed_window=7200 must be a timedelta"),
        ({"max_duration": 0}, "max_duration must be positive."),
        ({"max_duration": -1}, "max_duration must be positive."),
        ({"max_duration": timedelta(0)}, "max_duration must be positive."),
        ({"max_duration": "5m"}, "max_duration='5m' must be a timedelta or a number of seconds."),
        ({"max_duration": True}, "max_duration=True must be a timedelta or a number of seconds."),
        ({"retries": -1}, "retries=-1 must be a whole number from 0 to 100."),
        ({"retries": 101}, "retries=101 must be a whole number from 0 to 100."),
        ({"retries": 1.5}, "retries=1.5 must be a whole number from 0 to 100."),
        ({"retries": True}, "retries=True must be a whole number from 0 to 100."),
        ({"retries": "3"}, "retries='3' must be a whole number from 0 to 100."),
        ({"retry_backoff": 0}, "retry_backoff must be a positive timedelta or number of seconds."),
        ({"retry_backoff": -timedelta(seconds=1)}, "retry_backoff must be a positive timedelta"),
        ({"retry_backoff": "30s"}, "retry_backoff must be a positive timedelta"),
        ({"retry_backoff": False}, "retry_backoff must be a positive timedelta"),
        (
            {"transactional": True, "retry_abandoned": True},
            "retry_abandoned only applies to non-transactional jobs; a transactional job's "
            "crashed run rolls back and runs again by itself.",
        ),
    ],
)
def test_refused_options_say_what_is_wrong(given, problem):
    with pytest.raises(InvalidJobOption) as excinfo:
        JobOptions(**given)
    assert str(excinfo.value).startswith(problem), str(excinfo.value)


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"retrys": 3}, "retrys is not a job option; the options are missed, missed_window,"),
        ({"retrys": 3, "timeout": 5}, "retrys, timeout are not job options; the options are"),
        ({"retries": 1}, None),
    ],
)
def test_a_keyword_that_is_no_option_is_named(given, problem):
    if problem is None:
        assert JobOptions.from_keywords(given) == JobOptions(**given)
        return
    with pytest.raises(InvalidJobOption) as excinfo:
        JobOptions.from_keywords(given)
    assert str(excinfo.value).startswith(problem), str(excinfo.value)
    assert str(excinfo.value).endswith(f"{', '.join(OPTION_NAMES)}.")


@pytest.mark.parametrize(
    ("retries", "backoff", "attempt", "wait"),
    [
        (3, 10, 1, timedelta(seconds=10)),
        (3, 10, 2, timedelta(seconds=20)),
        (3, 10, 3, timedelta(seconds=40)),
        (3, 10, 4, None),
        (0, 10, 1, None),
        (20, 30, 20, MAX_RETRY_DELAY),
        (20, timedelta(hours=2), 1, MAX_RETRY_DELAY),
    ],
)
def test_retry_times_double_up_to_the_cap_and_stop_after_the_retries(
    retries, backoff, attempt, wait
):
    options = JobOptions(retries=retries, retry_backoff=backoff)
    at = options.retry_at(attempt, NOW)
    assert (at - NOW if at is not None else None) == wait


def declare_with_engine(**options):
    return make_job(noop, name="t.options", schedule=HOURLY, **options)


def declare_with_engine_decorator(**options):
    reg = JobRegistry()
    job(registry=reg, name="t.options", schedule=HOURLY, **options)(noop)
    return reg.get("t.options")


def declare_as_plugin(**options):
    return make_plugin_job(noop, plugin="t", name="options", schedule=HOURLY, **options)


def declare_with_plugin_decorator(**options):
    reg = JobRegistry()
    return plugin_job(plugin="t", name="options", schedule=HOURLY, registry=reg, **options)(
        noop
    ).job


DECLARATIONS = [
    declare_with_engine,
    declare_with_engine_decorator,
    declare_as_plugin,
    declare_with_plugin_decorator,
]


@pytest.mark.parametrize("declare", DECLARATIONS)
def test_every_declaration_helper_builds_the_options_and_reads_them_as_attributes(declare):
    declared = declare(missed="all", missed_window=timedelta(hours=1), max_duration=60, retries=2)
    assert declared.options == JobOptions(
        missed=Missed.ALL,
        missed_window=timedelta(hours=1),
        max_duration=timedelta(seconds=60),
        retries=2,
    )
    assert (declared.missed, declared.missed_window, declared.max_duration) == (
        Missed.ALL,
        timedelta(hours=1),
        timedelta(seconds=60),
    )
    assert (declared.retries, declared.retry_backoff) == (2, timedelta(seconds=30))
    assert not declared.transactional and not declared.retry_abandoned
    assert declared.retry_at(1, NOW) == NOW + timedelta(seconds=30)


@pytest.mark.parametrize("declare", DECLARATIONS)
@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"retries": -1}, "retries=-1 must be a whole number from 0 to 100."),
        ({"retrys": 1}, "retrys is not a job option;"),
        ({"max_duration": 0}, "max_duration must be positive."),
    ],
)
def test_every_declaration_helper_names_the_job_in_front_of_the_problem(declare, given, problem):
    with pytest.raises(JobDeclarationError) as excinfo:
        declare(**given)
    name = "t.options"
    assert str(excinfo.value).startswith(f"job {name!r}: {problem}"), str(excinfo.value)
