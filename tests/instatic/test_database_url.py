"""DATABASE_URL in libpq's multi-host form: a primary and its standbys.

libpq tries the hosts in order and, with ``target_session_attrs=read-write``, keeps the first
that accepts writes; that is how every scheduler connection (lock, work, listen) finds the new
primary after a failover (tests/coordination/test_failover.py does one for real).
"""

from pathlib import Path

import psycopg
import pytest
from django.db import connection

from coordination.dberrors import describe_settings
from instatic.database_url import DatabaseUrlError, database_from_url

UNUSED = Path("/nonexistent/unused.sqlite3")


def parse(url: str) -> dict:
    return database_from_url(url, default_sqlite_path=UNUSED)


def test_each_host_keeps_its_port_and_the_options_pass_through():
    config = parse(
        "postgres://u:p%40ss@db1:5432,db2:5433,[::1]/site?target_session_attrs=read-write"
    )
    assert (config["HOST"], config["PORT"]) == ("db1,db2,::1", "5432,5433,5432")
    assert (config["USER"], config["PASSWORD"], config["NAME"]) == ("u", "p@ss", "site")
    assert config["OPTIONS"] == {"target_session_attrs": "read-write"}


def test_a_single_host_url_is_parsed_as_before():
    config = parse("postgresql://u@db:6432/site")
    assert (config["HOST"], config["PORT"], config["NAME"]) == ("db", 6432, "site")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgres://u@db1:x,db2/site", "bad host 'db1:x' in the host list"),
        ("postgres://u@db1,,db2/site", "bad host '' in the host list"),
        ("mysql://u@db1,db2/site", "a list of hosts works with postgres:// only"),
    ],
)
def test_a_bad_host_list_is_one_clear_line(url, problem):
    with pytest.raises(DatabaseUrlError) as raised:
        parse(url)
    assert problem in str(raised.value)
    assert "\n" not in str(raised.value)


def test_error_messages_name_every_host_and_no_password():
    where = describe_settings(parse("postgres://u:secret@db1:5432,db2:5433/site"))
    assert where == "postgresql://db1:5432,db2:5433/site"


@pytest.mark.postgresql
@pytest.mark.django_db
def test_psycopg_skips_a_host_that_is_down_and_reaches_the_server():
    """A dead first host (nothing listens on port 1) is passed over for the live one."""
    live = connection.settings_dict
    url = (
        f"postgres://{live['USER']}@127.0.0.1:1,{live['HOST'] or '127.0.0.1'}:{live['PORT']}"
        f"/{live['NAME']}?target_session_attrs=read-write"
    )
    config = parse(url)
    with psycopg.connect(
        host=config["HOST"],
        port=config["PORT"],
        user=config["USER"],
        dbname=config["NAME"],
        **config["OPTIONS"],
    ) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.info.port == int(live["PORT"])
