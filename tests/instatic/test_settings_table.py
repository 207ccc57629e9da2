"""Every setting the README documents, given a bad value, stops every entry point with one line.

The rows come from the README's configuration table, so a newly documented setting is covered
as soon as its row is written. Which parser reads a variable is looked up where it is read
(``_env(parse_..., "NAME")`` in instatic/settings.py, or ``PROCESS_OPTIONS`` of the entry
scripts), and each parser kind has a wrong-type and an out-of-range value; an empty value is
refused by every setting with a default of its own, and means "none" for the others.

Every row goes through ``manage.py check`` (for the entry scripts' own variables: the script
that reads them). ``runscheduler`` and ``deploy/web.sh`` get one row of each parser kind: the
error is raised while the settings are imported, which all three do the same way (manage.py's
``django.setup()``; web.sh's ``instatic.process_options`` imports the settings before gunicorn
starts), so a row of each kind proves that each entry point turns each kind's error into one
line and status 1, and the full table through ``check`` proves every variable raises it. A
failing start costs a fifth of a second, and the rows run four at a time.
"""

import ast
import os
import secrets
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from instatic import process_options
from tests.deploy.support import DEPLOY, production_env
from tests.instatic.test_settings_env import documented
from tests.support.processes import BASE_DIR

# Once per `make test`: the processes use an SQLite file of their own, whatever the vendor.
pytestmark = [pytest.mark.multiprocess, pytest.mark.sqlite]

#: (wrong type, out of range) for each parser kind; None where the kind has no such value.
BAD_VALUES = {
    "parse_bool": ("maybe", None),
    "parse_seconds": ("soon", "-1"),
    "parse_int": ("2.5", None),  # out of range: below the reader's minimum (see rows())
    "parse_port": ("http", "65536"),
    "parse_choice": ("42", "sometimes"),
    "parse_log_level": ("42", "LOUD"),
    "parse_log_format": ("42", "xml"),
    "parse_time_zone": ("42", "Mars/Olympus"),
    "parse_path": (None, "relative/folder"),
    "parse_optional_path": (None, "relative/folder"),
    "parse_text": (None, None),
    "parse_secret_key": (None, "too-short"),
    "parse_token": (None, "too-short"),
    "parse_hosts": ("https://example.com/", "exa mple.com"),
    "parse_origins": ("example.com", "https://example.com:99999"),
    "parse_url": ("example.com", "https://example.com:99999/"),
    "parse_address": ("nobody", "two@example.com, three@example.com"),
    "parse_admins": ("ops", "ops@"),
    "parse_lock_keys": ("reports", "reports=0x1ffffffffffffffff"),
    "parse_proxy_ssl_header": ("X Forwarded Proto", "=https"),
    "parse_bind_address": ("not an address", "*"),
    "parse_database_url": ("postgres://u:p@[::1:5432/db", "postgres://u@db:99999/instatic"),
}
#: Parsers for which a set but empty value means "none" or "off", as unset does.
EMPTY_MEANS_NONE = {
    "parse_optional_path",
    "parse_text",
    "parse_token",
    "parse_origins",
    "parse_url",
    "parse_admins",
    "parse_lock_keys",
    "parse_proxy_ssl_header",
}
SCRIPT_OF = {"web": "web.sh", "scheduler": "scheduler.sh"}


@dataclass(frozen=True)
class Reader:
    parser: str
    minimum: int = 0
    script: str | None = None  # the entry script that reads it, for the scripts' own options


def settings_readers() -> dict[str, Reader]:
    """Return {variable: Reader} for every ``_env(parse_x, "NAME", ...)`` in settings.py."""
    tree = ast.parse((BASE_DIR / "instatic/settings.py").read_text())
    readers = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_env":
            parser, name = node.args[0].id, node.args[1].value
            keywords = {k.arg: k.value for k in node.keywords}
            minimum = ast.literal_eval(keywords["minimum"]) if "minimum" in keywords else 0
            readers[name] = Reader(parser, minimum)
    return readers


def script_readers() -> dict[str, Reader]:
    readers = {}
    for kind, options in process_options.PROCESS_OPTIONS.items():
        for parse, name, _default, *kwargs in options:
            minimum = kwargs[0].get("minimum", 0) if kwargs else 0
            readers[name] = Reader(parse.__name__, minimum, SCRIPT_OF[kind])
    return readers


def readers() -> dict[str, Reader]:
    return {**settings_readers(), **script_readers()}


@dataclass(frozen=True)
class Row:
    variable: str
    what: str  # "wrong type", "out of range", "empty"
    value: str
    reader: Reader

    def __str__(self):
        return f"{self.variable}={self.value!r} ({self.what})"


def rows() -> list[Row]:
    known = readers()
    table = []
    for variable in documented():
        reader = known[variable]
        wrong, out_of_range = BAD_VALUES[reader.parser]
        if reader.parser == "parse_int":
            out_of_range = str(reader.minimum - 1)
        for what, value in (("wrong type", wrong), ("out of range", out_of_range)):
            if value is not None:
                table.append(Row(variable, what, value, reader))
        if reader.parser not in EMPTY_MEANS_NONE:
            table.append(Row(variable, "empty", "", reader))
    return table


def sample(table: list[Row], script: str | None) -> list[Row]:
    """Return the first row of each parser kind read by the Django settings (or ``script``)."""
    seen, chosen = set(), []
    for row in table:
        if row.reader.script == script and row.reader.parser not in seen:
            seen.add(row.reader.parser)
            chosen.append(row)
    return chosen


def base_env(tmp_path) -> dict:
    """A production configuration that starts, with its SQLite folder not created yet."""
    return production_env(
        DJANGO_SETTINGS_MODULE="instatic.settings",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="example.com",
        DATABASE_URL=f"sqlite:///{tmp_path}/not-yet/instatic.sqlite3",
        INSTATIC_VAR_DIR=str(tmp_path / "var-not-yet"),
        INSTATIC_METRICS_ADDRESS="127.0.0.1",
        INSTATIC_METRICS_PORT="1",  # nothing reaches serving: every row stops before
        INSTATIC_WEB_ADDRESS="127.0.0.1",
        PORT="1",
    )


COMMANDS = {
    "check": [sys.executable, str(BASE_DIR / "manage.py"), "check"],
    "runscheduler": [sys.executable, str(BASE_DIR / "manage.py"), "runscheduler", "--once"],
    "web.sh": [str(DEPLOY / "web.sh")],
    "scheduler.sh": [str(DEPLOY / "scheduler.sh"), "--once"],
}


def outcome(command: str, row: Row, env: dict) -> str | None:
    """Run ``command`` with the row's value; return what is wrong, or None when all is well."""
    proc = subprocess.Popen(
        COMMANDS[command],
        cwd="/",
        env={**env, row.variable: row.value},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return f"{command} with {row}: still running after 60 s"
    lines = [line for line in err.splitlines() if line.strip()]
    if proc.returncode == 1 and len(lines) == 1 and row.variable in lines[0]:
        return None
    return f"{command} with {row}: exit {proc.returncode}, stderr {err[-600:]!r}"


def run_all(runs: list[tuple[str, Row]], env: dict) -> list[str]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        return [p for p in pool.map(lambda run: outcome(*run, env), runs) if p is not None]


def test_every_documented_setting_is_read_through_a_known_parser():
    known = readers()
    missing = sorted(set(documented()) - set(known))
    assert not missing, f"documented but not read through instatic.environment: {missing}"
    unknown = sorted({r.parser for r in known.values()} - set(BAD_VALUES))
    assert not unknown, f"parsers with no bad values in this table: {unknown}"
    undocumented = sorted(set(known) - set(documented()))
    assert not undocumented, f"read but not in the README's table: {undocumented}"


def test_every_bad_value_stops_check_or_its_script_with_one_line(tmp_path):
    env = base_env(tmp_path)
    table = rows()
    assert len(table) > 100
    problems = run_all([(row.reader.script or "check", row) for row in table], env)
    assert not problems, "\n".join(problems)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "check created something"


@pytest.mark.parametrize("command", ["runscheduler", "web.sh"])
def test_a_bad_value_of_each_kind_stops_runscheduler_and_the_web_script(tmp_path, command):
    env = base_env(tmp_path)
    table = rows()
    chosen = sample(table, None) + (sample(table, "web.sh") if command == "web.sh" else [])
    assert len(chosen) >= 15
    problems = run_all([(command, row) for row in chosen], env)
    assert not problems, "\n".join(problems)
