"""The settings' parsers (instatic/environment.py, DATABASE_URL's): tables and a property.

Every parser is a pure function of a variable's name and raw value: it returns the setting or
raises ``ConfigurationError`` with one line naming the variable. The property test feeds every
parser any string and checks that nothing else can happen.
"""

import inspect
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from instatic import database_url, environment, process_options
from instatic.environment import ConfigurationError

# Once per `make test`: pure functions of strings, the same whatever the run's vendor.
pytestmark = pytest.mark.sqlite

#: How the property test calls each parser: its arguments besides the name and the value.
#: A parser missing here fails test_every_parser_is_in_the_property_test.
ARGUMENTS = {
    "parse_bool": {"default": False},
    "parse_seconds": {"default": 10.0, "positive": True},
    "parse_int": {"default": 5, "minimum": 1, "maximum": 100},
    "parse_port": {"default": 25},
    "parse_choice": {"default": "session", "choices": ("session", "transaction")},
    "parse_log_level": {"default": "INFO"},
    "parse_log_format": {},
    "parse_time_zone": {"default": "UTC"},
    "parse_path": {"default": Path("/srv/var")},
    "parse_optional_path": {},
    "parse_text": {"default": ""},
    "parse_secret_key": {"debug": False, "development_key": "dev"},
    "parse_token": {},
    "parse_hosts": {"default": ["localhost"]},
    "parse_origins": {},
    "parse_url": {},
    "parse_address": {"default": "instatic@localhost"},
    "parse_admins": {},
    "parse_lock_keys": {},
    "parse_proxy_ssl_header": {},
    "parse_bind_address": {"default": "0.0.0.0"},
    "parse_database_url": {"default_sqlite_path": Path("/nonexistent/instatic.sqlite3")},
}


def parsers() -> dict:
    found = {
        name: function
        for module in (environment, database_url)
        for name, function in inspect.getmembers(module, inspect.isfunction)
        if name.startswith("parse_") and function.__module__ == module.__name__
    }
    return found


def variable_for(name: str) -> str:
    return "DATABASE_URL" if name == "parse_database_url" else "INSTATIC_EXAMPLE"


def test_every_parser_is_in_the_property_test():
    assert sorted(parsers()) == sorted(ARGUMENTS)
    used = {
        parse.__name__
        for options in process_options.PROCESS_OPTIONS.values()
        for parse, *_ in options
    }
    assert used <= set(ARGUMENTS)


VALUES = st.one_of(
    st.none(),
    st.text(),
    st.sampled_from(["", " ", "0", "-1", "1e400", "nan", "inf", "0x10", "a=1,b=2", "://"]),
    st.builds(
        lambda s, rest: f"{s}://{rest}", st.sampled_from(database_url.ACCEPTED_SCHEMES), st.text()
    ),
)


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
@hypothesis_settings(max_examples=100)
@given(value=VALUES)
def test_any_string_parses_or_is_one_line_naming_the_variable(name, value):
    variable = variable_for(name)
    try:
        parsers()[name](variable, value, **ARGUMENTS[name])
    except ConfigurationError as error:
        message = str(error)
        assert message and "\n" not in message and "\r" not in message
        assert variable in message
        assert error.code == message, "exits with its message (status 1)"


# --- tables ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("parse", "value", "kwargs", "expected"),
    [
        (environment.parse_bool, None, {"default": True}, True),
        (environment.parse_bool, " Yes ", {"default": False}, True),
        (environment.parse_bool, "off", {"default": True}, False),
        (environment.parse_seconds, "2.5", {"default": 1.0}, 2.5),
        (environment.parse_seconds, "0", {"default": 1.0}, 0.0),
        (environment.parse_int, "7", {"default": 1, "minimum": 1}, 7),
        (environment.parse_port, "65535", {"default": 25}, 65535),
        (environment.parse_log_level, "debug", {"default": "INFO"}, "DEBUG"),
        (environment.parse_time_zone, "Europe/Paris", {"default": "UTC"}, "Europe/Paris"),
        (
            environment.parse_hosts,
            ".example.com, [::1]",
            {"default": []},
            [".example.com", "[::1]"],
        ),
        (
            environment.parse_origins,
            "https://a.example, http://b:8000",
            {},
            ["https://a.example", "http://b:8000"],
        ),
        (
            environment.parse_admins,
            "Ops <ops@example.com>, ann@example.com",
            {},
            [("Ops", "ops@example.com"), ("ann@example.com", "ann@example.com")],
        ),
        (environment.parse_admins, "", {}, []),
        (environment.parse_token, "", {}, ""),
        (environment.parse_optional_path, "", {}, ""),
        (
            environment.parse_lock_keys,
            "reports=0x1234, imports=42",
            {},
            {"reports": 0x1234, "imports": 42},
        ),
        (
            environment.parse_proxy_ssl_header,
            "X-Forwarded-Proto",
            {},
            ("HTTP_X_FORWARDED_PROTO", "https"),
        ),
        (environment.parse_bind_address, "::", {"default": "0.0.0.0"}, "::"),
    ],
)
def test_good_values_parse(parse, value, kwargs, expected):
    assert parse("X", value, **kwargs) == expected


@pytest.mark.parametrize(
    ("parse", "value", "kwargs", "problem", "example"),
    [
        (environment.parse_bool, "maybe", {"default": False}, "is not a boolean", "X=1"),
        (environment.parse_bool, "", {"default": False}, "is set but empty", "X=1"),
        (
            environment.parse_seconds,
            "soon",
            {"default": 10.0},
            "is not a number of seconds",
            "X=10",
        ),
        (environment.parse_seconds, "-1", {"default": 10.0}, "out of range", "X=10"),
        (environment.parse_seconds, "0", {"default": 5.0, "positive": True}, "above 0", "X=5"),
        (environment.parse_seconds, "inf", {"default": 5.0}, "out of range", "X=5"),
        (environment.parse_int, "2.5", {"default": 3}, "is not a whole number", "X=3"),
        (environment.parse_int, "0", {"default": 3, "minimum": 1}, "at least 1", "X=3"),
        (environment.parse_port, "65536", {"default": 25}, "from 1 to 65535", "X=25"),
        (
            environment.parse_log_level,
            "LOUD",
            {"default": "INFO"},
            "is not a log level",
            "X=WARNING",
        ),
        (
            environment.parse_time_zone,
            "Mars/Olympus",
            {"default": "UTC"},
            "not a known time zone",
            "X=Europe/Paris",
        ),
        (
            environment.parse_time_zone,
            "../../etc/passwd",
            {"default": "UTC"},
            "not a known time zone",
            "X=Europe/Paris",
        ),
        (
            environment.parse_choice,
            "transacton",
            {"default": "session", "choices": ("session", "transaction")},
            "is not one of session, transaction",
            "X=transaction",
        ),
        (
            environment.parse_path,
            "var",
            {"default": Path("/srv")},
            "is not an absolute path",
            "X=/srv/instatic/var",
        ),
        (
            environment.parse_hosts,
            "https://example.com",
            {"default": []},
            "not a host name",
            "X=example.com",
        ),
        (environment.parse_hosts, ",", {"default": []}, "names no host", "X=example.com"),
        (environment.parse_origins, "example.com", {}, "not an origin", "X=https://example.com"),
        (
            environment.parse_url,
            "example.com/site",
            {},
            "not an http(s) URL",
            "X=https://example.com/",
        ),
        (
            environment.parse_address,
            "nobody",
            {"default": "a@b"},
            "not one mail address",
            "X=instatic@example.com",
        ),
        (environment.parse_admins, "ops", {}, "not a list of mail addresses", "ops@example.com"),
        (environment.parse_lock_keys, "reports", {}, "64-bit integer", "X=reports=0x1234"),
        (
            environment.parse_proxy_ssl_header,
            "=https",
            {},
            "is not a header",
            "X=X-Forwarded-Proto",
        ),
        (
            environment.parse_bind_address,
            "not an address",
            {"default": "0.0.0.0"},
            "not an address",
            "X=127.0.0.1",
        ),
    ],
)
def test_bad_values_are_one_line_with_the_problem_and_an_example(
    parse, value, kwargs, problem, example
):
    with pytest.raises(ConfigurationError) as raised:
        parse("X", value, **kwargs)
    message = str(raised.value)
    assert message.startswith("X"), message
    assert problem in message and example in message, message
    assert "\n" not in message


def test_a_secret_is_not_printed():
    with pytest.raises(ConfigurationError) as raised:
        environment.parse_token("X", "short-secret")
    assert "short-secret" not in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:
        environment.parse_secret_key("X", "weak-key", debug=False, development_key="")
    assert "weak-key" not in str(raised.value)
