"""Bad job declarations become one line each, naming the file and line, never a traceback.

While ``jobs.py`` modules are discovered, a bad declaration is recorded (and its function left
undeclared) so the rest of the file still registers; outside discovery (a shell, a test) it
raises at once. A ``jobs.py`` that fails to import is reported at the line it stopped on.
"""

import logging
import sys
import textwrap
from datetime import timedelta

import pytest

from coordination import registry as registry_module
from coordination.registry import (
    JobDeclarationError,
    JobRegistry,
    discovering,
    import_failure,
    is_discovering,
    job,
    log_declaration_errors,
    make_job,
    registry,
)
from coordination.schedules import every

HOURLY = every(timedelta(hours=1))
THIS_FILE = "tests/coordination/test_job_declaration_errors.py"


def bad_timeout(ctx):
    """A job declared below with a max_duration of zero."""


def test_a_bad_declaration_found_while_discovering_is_recorded_with_its_file_and_line():
    reg = JobRegistry()
    decorate = job(registry=reg, name="decl.bad", schedule=HOURLY, max_duration=timedelta(0))
    with discovering():
        assert is_discovering()
        assert decorate(bad_timeout) is bad_timeout, "the function itself stays usable"
        good = job(registry=reg, name="decl.good", schedule=HOURLY)(lambda ctx: None)
    assert not is_discovering()
    line = bad_timeout.__code__.co_firstlineno
    assert reg.errors == [
        f"{THIS_FILE}:{line}: job 'decl.bad': max_duration must be positive. "
        "(this job is not scheduled)"
    ]
    assert [j.name for j in reg.all()] == ["decl.good"] and callable(good)


def test_outside_discovery_a_bad_declaration_raises_at_once():
    reg = JobRegistry()
    with pytest.raises(JobDeclarationError, match="max_duration must be positive"):
        job(registry=reg, name="decl.bad", schedule=HOURLY, max_duration=timedelta(0))(bad_timeout)
    with pytest.raises(JobDeclarationError, match="is not callable"):
        make_job("not a function", name="decl.text", schedule=HOURLY)
    assert reg.errors == [] and reg.all() == []


def test_a_declaration_that_fails_inside_temporary_leaves_the_registry_as_it_was():
    reg = JobRegistry()
    kept = reg.register(make_job(lambda ctx: None, name="decl.kept", schedule=HOURLY))
    clash = make_job(bad_timeout, name="decl.kept", schedule=HOURLY)
    other = make_job(lambda ctx: None, name="decl.other", schedule=HOURLY)
    reg.errors.append("an earlier error")
    with pytest.raises(JobDeclarationError, match="is declared twice"), reg.temporary(other, clash):
        pass  # pragma: no cover - never entered
    assert reg.all() == [kept] and reg.errors == ["an earlier error"]
    reg.unregister("decl.kept")
    reg.unregister("decl.never-declared")
    assert reg.all() == []


@pytest.fixture
def package(tmp_path, monkeypatch):
    """Write a package with the given ``jobs.py`` text on ``sys.path``; return its name."""
    made = []

    def write(name: str, source: str) -> str:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "__init__.py").write_text("")
        (folder / "jobs.py").write_text(textwrap.dedent(source))
        made.append(name)
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    yield write
    for name in made:
        for module in (f"{name}.jobs", name):
            sys.modules.pop(module, None)


def failure_of(module: str) -> str:
    try:
        __import__(module)
    except Exception as exc:  # noqa: BLE001 - what autodiscover catches
        return import_failure(module, exc)
    raise AssertionError(f"{module} imported")


def test_a_jobs_module_that_raises_is_reported_at_its_line(package, tmp_path):
    name = package(
        "raising_plugin",
        """\
        import os

        SETTING = os.environ["INSTATIC_NO_SUCH_VARIABLE"]
        """,
    )
    path = tmp_path / name / "jobs.py"
    assert failure_of(f"{name}.jobs") == (
        f"{path}:3: KeyError: 'INSTATIC_NO_SUCH_VARIABLE' (importing {name}.jobs stopped here: "
        "no job from this line on is scheduled)"
    )


def test_a_jobs_module_with_a_syntax_error_is_reported_at_its_line(package, tmp_path):
    name = package("broken_plugin", "def job(:\n")
    message = failure_of(f"{name}.jobs")
    assert message.startswith(f"{tmp_path / name / 'jobs.py'}:1: SyntaxError: ")


def test_a_declaration_error_that_stops_an_import_is_reported_as_itself(package, tmp_path):
    name = package(
        "strict_plugin",
        """\
        from datetime import timedelta

        from coordination.registry import make_job
        from coordination.schedules import every

        make_job(print, name="strict.job", schedule=every(timedelta(hours=1)),
                 max_duration=timedelta(0))
        """,
    )
    assert failure_of(f"{name}.jobs") == (
        f"{tmp_path / name / 'jobs.py'}:6: job 'strict.job': max_duration must be positive. "
        f"(importing {name}.jobs stopped here: no job from this line on is scheduled)"
    )


def test_the_web_process_logs_the_declaration_errors_once_in_one_line(caplog):
    with registry.temporary():
        log_declaration_errors()
        assert not caplog.records, "nothing to say without errors"
        registry.errors.extend(["a/jobs.py:1: job 'a.b': bad", "c/jobs.py:2: job 'c.d': worse"])
        with caplog.at_level(logging.ERROR, logger=registry_module.__name__):
            log_declaration_errors()
    assert [r.getMessage() for r in caplog.records] == [
        "2 invalid job declaration(s) are not scheduled (manage.py check lists them): "
        "a/jobs.py:1: job 'a.b': bad; c/jobs.py:2: job 'c.d': worse"
    ]
