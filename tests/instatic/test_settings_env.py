"""The configuration docs tell the truth.

- every setting the apps honour (their ``conf.py`` defaults) can be set from the environment in
  ``instatic/settings.py`` and has a row in the README's configuration table;
- a bad value stops the process with one line naming the variable;
- every variable the deploy scripts read is documented, with the script that reads it;
- the commands in docs/ha.md work with what docker-compose.yml requires, and its code runs.
"""

import json
import re
import subprocess
import sys

import pytest

from coordination import conf as coordination_conf
from coordination.registry import registry
from plugins import conf as plugins_conf
from publishing import conf as publishing_conf
from tests.support.processes import BASE_DIR

README = (BASE_DIR / "README.md").read_text()
SETTINGS = (BASE_DIR / "instatic/settings.py").read_text()
HA = (BASE_DIR / "docs/ha.md").read_text()
APP_SETTINGS = sorted(
    f"INSTATIC_{name}"
    for conf in (coordination_conf, publishing_conf, plugins_conf)
    for name in conf._DEFAULTS
)


def documented() -> dict[str, str]:
    """Return {variable: its README table row} for every variable the table names."""
    rows = {}
    for line in README.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", first_cell):
                rows[name] = line
    return rows


def read_settings(**env: str) -> subprocess.CompletedProcess:
    """Import the settings in a fresh process with only ``env`` set (plus what it needs)."""
    code = (
        "import json, instatic.settings as s; "
        "print(json.dumps({k: getattr(s, k) for k in dir(s) if k.isupper()}, default=str))"
    )
    base = {"DJANGO_DEBUG": "1", "PATH": "/usr/bin:/bin", "INSTATIC_VAR_DIR": "/nonexistent/var"}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=BASE_DIR,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def settings_with(**env: str) -> dict:
    result = read_settings(**env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def one_line_error(**env: str) -> str:
    result = read_settings(**env)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("variable", APP_SETTINGS)
def test_every_honoured_setting_is_read_from_the_environment_and_documented(variable):
    assert re.search(rf"""["']{variable}["']""", SETTINGS), f"{variable} not read in settings.py"
    assert variable in documented(), f"{variable} has no row in the README's table"


def test_environment_values_reach_the_settings():
    values = settings_with(
        INSTATIC_LOCK_WAIT="12.5",
        INSTATIC_DB_RETRY_MAX="3",
        INSTATIC_LOCK_KEYS="reports=0x1234, imports=42",
        INSTATIC_PUBLISH_LINEUP_SIZE="7",
        INSTATIC_POSTS_PER_PAGE="25",
        INSTATIC_FEED_SIZE="50",
        INSTATIC_POST_BODY_MAX_CHARS="1000",
        INSTATIC_RUN_RETENTION="300",
    )
    assert values["INSTATIC_LOCK_WAIT"] == 12.5
    assert values["INSTATIC_DB_RETRY_MAX"] == 3.0
    assert values["INSTATIC_LOCK_KEYS"] == {"reports": 0x1234, "imports": 42}
    assert values["INSTATIC_PUBLISH_LINEUP_SIZE"] == 7
    assert values["INSTATIC_POSTS_PER_PAGE"] == 25
    assert values["INSTATIC_FEED_SIZE"] == 50
    assert values["INSTATIC_POST_BODY_MAX_CHARS"] == 1000
    assert values["INSTATIC_RUN_RETENTION"] == 300
    defaults = settings_with()
    for name in APP_SETTINGS:
        conf = next(
            c
            for c in (coordination_conf, publishing_conf, plugins_conf)
            if name.removeprefix("INSTATIC_") in c._DEFAULTS
        )
        default = conf._DEFAULTS[name.removeprefix("INSTATIC_")]
        assert defaults[name] == default, f"{name}: settings.py and conf.py disagree on the default"


@pytest.mark.parametrize(
    "variable, value",
    [
        ("INSTATIC_LOCK_WAIT", "soon"),
        ("INSTATIC_LOCK_WAIT", "-1"),
        ("INSTATIC_DB_RETRY_MAX", "0"),
        ("INSTATIC_LOCK_KEYS", "reports"),
        ("INSTATIC_LOCK_KEYS", "reports=0x12g4"),
        ("INSTATIC_LOCK_KEYS", "reports=0x1ffffffffffffffff"),
        ("INSTATIC_LOCK_KEYS", "reports=1,reports=2"),
        ("INSTATIC_POSTS_PER_PAGE", "0"),
        ("INSTATIC_POSTS_PER_PAGE", "2.5"),
        ("INSTATIC_FEED_SIZE", "many"),
        ("INSTATIC_PUBLISH_LINEUP_SIZE", "-3"),
        ("INSTATIC_POST_BODY_MAX_CHARS", "ten"),
        ("INSTATIC_RUN_RETENTION", "1.5"),
    ],
)
def test_a_bad_value_stops_with_one_line_naming_the_variable(variable, value):
    line = one_line_error(**{variable: value})
    assert variable in line, line


def deploy_variables() -> set[str]:
    """Return the variables the deploy scripts (not settings.py) read."""
    names = set()
    for script in (BASE_DIR / "deploy").glob("*.sh"):
        names |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)[:}]", script.read_text()))
    healthcheck = (BASE_DIR / "deploy/healthcheck.py").read_text()
    names |= set(re.findall(r"environ\.get\(\"([A-Z][A-Z0-9_]*)\"", healthcheck))
    return names


def test_the_readme_says_where_each_variable_is_read():
    rows = documented()
    for name in deploy_variables():
        if re.search(rf"""["']{name}["']""", SETTINGS):
            continue
        assert name in rows, f"{name} (read by deploy/) has no row in the README"
        assert "deploy/" in rows[name], f"the README row of {name} does not say deploy/ reads it"
    assert "Everything is read from the environment in `instatic/settings.py`." not in README
    assert "deploy/" in README.split("| Variable |")[0].split("## Configuration")[1]


def test_ha_deploy_commands_export_what_compose_requires():
    compose = (BASE_DIR / "docker-compose.yml").read_text()
    required = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*):\?", compose))
    assert required >= {"POSTGRES_PASSWORD", "DJANGO_SECRET_KEY"}
    (deploy_block,) = re.findall(r"## Deploying N replicas.*?```sh\n(.*?)```", HA, flags=re.DOTALL)
    exported = set(re.findall(r"export ([A-Z][A-Z0-9_]*)=", deploy_block))
    assert required <= exported, f"docs/ha.md's commands miss {sorted(required - exported)}"


def test_ha_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", HA, flags=re.DOTALL)
    assert blocks
    with registry.temporary():
        for block in blocks:
            exec(compile(block, "docs/ha.md", "exec"), {})
        declared = {job.name: job for job in registry.all()}
    assert declared["reports.nightly"].group == "reports"
