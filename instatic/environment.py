"""Parse environment values into settings, or stop with one line that says how to fix them.

Each parser is a pure function of the variable's name and its raw value (``None`` when it is
unset): it returns the setting, or raises :class:`ConfigurationError`, whose one-line message
names the variable, says what is wrong with the value and gives a value that works. The error
is a :class:`SystemExit`, so wherever settings are read (``manage.py``, ``runscheduler``,
gunicorn's master, :mod:`instatic.process_options`) the process prints that line, and nothing
else, and exits with status 1 before it touches anything.

An unset variable gives the default. A variable that is set but empty is refused when the
setting has a default of its own (``INSTATIC_LEASE=`` is a value left out, not a request for
the default); it means "none" for settings whose unset state is "none" or "off" (a token, a
list of admins, the export folder).
"""

import math
import re
import zoneinfo
from email.utils import getaddresses
from pathlib import Path
from urllib.parse import urlsplit

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
MIN_TOKEN_LENGTH = 32
MIN_SECRET_KEY_LENGTH = 50
MAX_PORT = 65535
_HOST = re.compile(r"(\*|\.?[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\])")
_HEADER = re.compile(r"[A-Za-z0-9-]+")


class ConfigurationError(SystemExit):
    """A setting Instatic cannot use; exits the process (status 1) with its one-line message."""

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))


def invalid(name: str, value: str | None, problem: str, example: str, *, secret: bool = False):
    """Return the error for ``name``: its value (unless ``secret``), the problem, an example."""
    shown = name if secret or value is None else f"{name}={value!r}"
    return ConfigurationError(f"{shown} {problem}; use e.g. {name}={example}")


def _present(name: str, value: str | None, example: str, default: str) -> str | None:
    """Return ``value`` stripped, ``None`` when unset; refuse a set but empty value."""
    if value is None:
        return None
    if not value.strip():
        raise ConfigurationError(
            f"{name} is set but empty; unset it for the default ({default}) or give a value, "
            f"e.g. {name}={example}"
        )
    return value.strip()


def parse_bool(name: str, value: str | None, default: bool) -> bool:
    """Return a boolean written as 1/0, true/false, yes/no or on/off."""
    text = _present(name, value, "1" if not default else "0", "on" if default else "off")
    if text is None:
        return default
    if text.lower() in TRUE_WORDS:
        return True
    if text.lower() in FALSE_WORDS:
        return False
    raise invalid(name, value, "is not a boolean (1/0, true/false, yes/no, on/off)", "1")


def parse_seconds(name: str, value: str | None, default: float, *, positive=False) -> float:
    """Return a finite number of seconds, at least 0 (above 0 when ``positive``)."""
    example = f"{default:g}" if default > 0 else "10"
    text = _present(name, value, example, f"{default:g}")
    if text is None:
        return default
    try:
        number = float(text)
    except ValueError:
        raise invalid(name, value, "is not a number of seconds", example) from None
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "above 0" if positive else "of at least 0"
        raise invalid(name, value, f"is out of range (a number of seconds {bound})", example)
    return number


def parse_int(
    name: str, value: str | None, default: int, *, minimum: int = 0, maximum: int | None = None
) -> int:
    """Return a whole number from ``minimum`` to ``maximum`` (no upper bound when ``None``)."""
    example = str(max(default, minimum))
    text = _present(name, value, example, str(default))
    if text is None:
        return default
    try:
        number = int(text)
    except ValueError:
        raise invalid(name, value, "is not a whole number", example) from None
    if number < minimum or (maximum is not None and number > maximum):
        bounds = f"from {minimum} to {maximum}" if maximum is not None else f"at least {minimum}"
        raise invalid(name, value, f"is out of range (a whole number {bounds})", example)
    return number


def parse_port(name: str, value: str | None, default: int) -> int:
    """Return a TCP port number (1 to 65535)."""
    return parse_int(name, value, default, minimum=1, maximum=MAX_PORT)


def parse_choice(name: str, value: str | None, default: str, choices: tuple[str, ...]) -> str:
    """Return one of ``choices`` (compared case-insensitively)."""
    text = _present(name, value, choices[-1], default)
    if text is None:
        return default
    if text.lower() not in choices:
        raise invalid(name, value, f"is not one of {', '.join(choices)}", choices[-1])
    return text.lower()


def parse_log_level(name: str, value: str | None, default: str) -> str:
    """Return a logging level name (DEBUG, INFO, WARNING, ERROR, CRITICAL)."""
    text = _present(name, value, "WARNING", default)
    if text is None:
        return default
    if text.upper() not in LOG_LEVELS:
        raise invalid(name, value, f"is not a log level ({', '.join(LOG_LEVELS)})", "WARNING")
    return text.upper()


def parse_time_zone(name: str, value: str | None, default: str) -> str:
    """Return an IANA time zone name that this machine's zone database knows."""
    text = _present(name, value, "Europe/Paris", default)
    if text is None:
        return default
    try:
        zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise invalid(name, value, "is not a known time zone", "Europe/Paris") from None
    return text


def parse_path(name: str, value: str | None, default: Path) -> Path:
    """Return an absolute folder path (a relative one would depend on the working directory)."""
    text = _present(name, value, "/srv/instatic/var", str(default))
    if text is None:
        return default
    if "\0" in text or not Path(text).is_absolute():
        raise invalid(name, value, "is not an absolute path", "/srv/instatic/var")
    return Path(text)


def parse_optional_path(name: str, value: str | None) -> str:
    """Return an absolute folder path, or ``""`` when unset or empty (the feature is off)."""
    if value is None or not value.strip():
        return ""
    return str(parse_path(name, value, Path("/")))


def parse_text(name: str, value: str | None, default: str) -> str:
    """Return free text (any value, stripped); unset or empty gives ``default``."""
    if value is None or not value.strip():
        return default
    return value.strip()


def parse_secret_key(name: str, value: str | None, *, debug: bool, development_key: str) -> str:
    """Return the secret key; production needs 50 random characters, development any."""
    how = f"e.g. export {name}=$(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
    key = value or ""
    if not key:
        if debug:
            return development_key
        raise ConfigurationError(
            f"{name} is not set. Production mode (DJANGO_DEBUG off) needs a long random "
            f"secret, {how}, or set DJANGO_DEBUG=1 for local development."
        )
    if not debug and (len(key) < MIN_SECRET_KEY_LENGTH or len(set(key)) < 5):
        # Django's own deploy check (security.W009) only warns; a guessable key signs sessions.
        raise ConfigurationError(
            f"{name} is too weak ({len(key)} characters, {len(set(key))} different); production "
            f"needs at least {MIN_SECRET_KEY_LENGTH} random characters, {how}."
        )
    return key


def parse_token(name: str, value: str | None) -> str:
    """Return a bearer token ("" when unset or empty); refuse a guessable (short) one."""
    token = (value or "").strip()
    if token and len(token) < MIN_TOKEN_LENGTH:
        raise ConfigurationError(
            f"{name} is {len(token)} characters long; use at least {MIN_TOKEN_LENGTH} random "
            f"characters, e.g. export {name}=$(python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'), or unset it."
        )
    return token


def parse_hosts(name: str, value: str | None, default: list[str]) -> list[str]:
    """Return the host names of a comma-separated list (``.example.com``, ``*``, ``[::1]``)."""
    example = "example.com,www.example.com"
    text = _present(name, value, example, ",".join(default))
    if text is None:
        return list(default)
    hosts = [host.strip() for host in text.split(",") if host.strip()]
    for host in hosts:
        if not _HOST.fullmatch(host):
            raise invalid(name, value, f"has {host!r}, which is not a host name", example)
    if not hosts:
        raise invalid(name, value, "names no host", example)
    return hosts


def parse_origins(name: str, value: str | None) -> list[str]:
    """Return the origins (``scheme://host[:port]``) of a comma-separated list; empty: none."""
    origins = [origin.strip() for origin in (value or "").split(",") if origin.strip()]
    for origin in origins:
        try:
            parts = urlsplit(origin)
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
            ok = ok and (parts.port is None or parts.port > 0)  # .port checks the number
            ok = ok and parts.path in ("", "/") and not parts.query and not parts.fragment
        except ValueError:
            ok = False
        if not ok:
            raise invalid(
                name, value, f"has {origin!r}, which is not an origin", "https://example.com"
            )
    return origins


def parse_url(name: str, value: str | None) -> str:
    """Return an http(s) URL with a host, or ``""`` when unset or empty."""
    text = (value or "").strip()
    if not text:
        return ""
    try:
        parts = urlsplit(text)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        ok = ok and (parts.port is None or parts.port > 0)
    except ValueError:
        ok = False
    if not ok:
        raise invalid(name, value, "is not an http(s) URL with a host", "https://example.com/")
    return text


def parse_address(name: str, value: str | None, default: str) -> str:
    """Return one mail address (``user@host`` or ``Name <user@host>``)."""
    example = "instatic@example.com"
    text = _present(name, value, example, default)
    if text is None:
        return default
    parsed = getaddresses([text])
    if len(parsed) != 1 or not _is_address(parsed[0][1]):
        raise invalid(name, value, "is not one mail address", example)
    return text


def parse_admins(name: str, value: str | None) -> list[tuple[str, str]]:
    """Return ``[(name, address)]`` from a comma-separated list of addresses; empty: nobody."""
    text = (value or "").strip()
    if not text:
        return []
    admins = []
    for person, address in getaddresses([text]):
        if not _is_address(address):
            raise invalid(
                name,
                value,
                "is not a list of mail addresses",
                "'Ops <ops@example.com>, ann@example.com'",
            )
        admins.append((person or address, address))
    return admins


def _is_address(address: str) -> bool:
    user, at, domain = address.rpartition("@")
    return bool(at and user and domain) and not any(c.isspace() for c in address)


def parse_lock_keys(name: str, value: str | None) -> dict[str, int]:
    """Return ``group=key,group=key`` as a dict; keys are 64-bit integers (decimal or 0x hex)."""
    keys: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in (value or "").split(","))):
        group, _, key = (part.strip() for part in item.partition("="))
        try:
            number = int(key, 0)
        except ValueError:
            number = None
        if not group or number is None or not -(2**63) <= number <= 2**64 - 1 or group in keys:
            raise invalid(
                name,
                value,
                f"gives {item!r}, not one 64-bit integer key for one group",
                "reports=0x1234,imports=42",
            )
        keys[group] = number
    return keys


def parse_proxy_ssl_header(name: str, value: str | None) -> tuple[str, str] | None:
    """Return ``SECURE_PROXY_SSL_HEADER`` from ``Header`` or ``Header=value`` (None: unset).

    Only a proxy that always sets (or strips) the header makes it trustworthy: otherwise any
    client can claim HTTPS by sending it, so nothing is trusted unless the operator says so.
    """
    text = (value or "").strip()
    if not text:
        return None
    header, equals, expected = (part.strip() for part in text.partition("="))
    if not equals:
        expected = "https"
    if not _HEADER.fullmatch(header) or not expected:
        raise invalid(
            name,
            value,
            "is not a header; name the header your proxy sets on HTTPS requests (or unset it "
            "when no proxy sets one)",
            "X-Forwarded-Proto (or X-Forwarded-Proto=https)",
        )
    return ("HTTP_" + header.upper().replace("-", "_"), expected)


def parse_log_format(name: str, value: str | None) -> str:
    """Return ``text`` (the default) or ``json``."""
    return parse_choice(name, value, "text", LOG_FORMATS)


def parse_bind_address(name: str, value: str | None, default: str) -> str:
    """Return an address to listen on: an IPv4/IPv6 address or a host name."""
    text = _present(name, value, "127.0.0.1", default)
    if text is None:
        return default
    if not (_HOST.fullmatch(text) and text != "*") and not re.fullmatch(r"[0-9A-Fa-f:.]+", text):
        raise invalid(name, value, "is not an address to listen on", "127.0.0.1")
    return text
