#!/usr/bin/env python3
"""Container health check: exit 0 when this container's process is healthy, 1 when not.

Usage: ``python deploy/healthcheck.py [web|scheduler|worker]``. Without an argument the kind
is read from PID 1's command line (the entry scripts ``exec``, so PID 1 is gunicorn,
``manage.py runscheduler`` or ``manage.py runworker``); any other process (e.g. the one-shot
``migrate``) counts as healthy.

- web: ``GET /healthz`` on the gunicorn port (``PORT``), sent with a ``Host`` header taken from
  ``DJANGO_ALLOWED_HOSTS`` so Django does not answer 400 to ``127.0.0.1``;
- scheduler: ``GET /healthz`` on the metrics port (``INSTATIC_METRICS_PORT``): this node's
  own heartbeat, so the check works when only the scheduler container runs; its worker
  pool's health too;
- worker: ``GET /healthz`` on the same port of ``runworker --metrics-port``: whether its
  worker pool keeps its processes up (none crash-looping).

Both answer 200/503 with the status only; when ``INSTATIC_HEALTH_TOKEN`` is set the check sends
it as a bearer token, so the container's health log shows the reason too.

Standard library only, and it never imports Django: it runs every few seconds.
"""

import os
import sys
import urllib.error
import urllib.request

TIMEOUT = 4.0
PROC_CMDLINE = "/proc/1/cmdline"
ANY_ADDRESS = {"", "0.0.0.0", "::", "[::]"}


def detect_kind(cmdline: bytes) -> str | None:
    """Return ``web``, ``scheduler`` or ``worker`` for a NUL-separated ``/proc/<pid>/cmdline``."""
    args = [part.decode(errors="replace") for part in cmdline.split(b"\0") if part]
    if any(os.path.basename(arg).startswith("gunicorn") for arg in args):
        return "web"
    if "runscheduler" in args:
        return "scheduler"
    if "runworker" in args:
        return "worker"
    return None


def host_header(allowed_hosts: str) -> str:
    """Return a Host value that ``DJANGO_ALLOWED_HOSTS`` accepts (its first entry)."""
    for entry in allowed_hosts.split(","):
        entry = entry.strip()
        if not entry:
            continue
        if entry == "*":
            return "localhost"
        return entry.lstrip(".")
    return "localhost"


def connect_address(bound: str) -> str:
    """Return where to connect for a server bound to ``bound``."""
    if bound in ANY_ADDRESS:
        return "127.0.0.1"
    if ":" in bound and not bound.startswith("["):
        return f"[{bound}]"
    return bound


def target(kind: str, environ) -> tuple[str, dict]:
    """Return (url, headers) to check for ``kind``."""
    url, headers = _target(kind, environ)
    token = environ.get("INSTATIC_HEALTH_TOKEN", "").strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return url, headers


def _target(kind: str, environ) -> tuple[str, dict]:
    if kind == "web":
        address = connect_address(environ.get("INSTATIC_WEB_ADDRESS", ""))
        port = environ.get("PORT") or "8000"
        headers = {
            "Host": host_header(environ.get("DJANGO_ALLOWED_HOSTS", "localhost")),
            # Look like the TLS-terminating proxy, so no HTTPS redirect gets in the way.
            "X-Forwarded-Proto": "https",
        }
        return f"http://{address}:{port}/healthz", headers
    address = connect_address(environ.get("INSTATIC_METRICS_ADDRESS", ""))
    port = environ.get("INSTATIC_METRICS_PORT") or "9100"
    return f"http://{address}:{port}/healthz", {}


def check(kind: str, environ) -> tuple[bool, str]:
    """Return (healthy, one line saying why)."""
    url, headers = target(kind, environ)
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            body = response.read(500).decode(errors="replace")
            return True, f"{kind}: {response.status} {body}"
    except urllib.error.HTTPError as exc:
        body = exc.read(500).decode(errors="replace")
        return False, f"{kind}: {url} answered {exc.code} {body}"
    except (OSError, ValueError) as exc:
        return False, f"{kind}: {url} unreachable: {exc}"


def main(argv: list[str], environ=os.environ) -> int:
    if argv:
        kind = argv[0]
        if kind not in ("web", "scheduler", "worker"):
            sys.stderr.write(f"usage: healthcheck.py [web|scheduler|worker] (got {kind!r})\n")
            return 2
    else:
        try:
            with open(PROC_CMDLINE, "rb") as f:
                kind = detect_kind(f.read())
        except OSError:
            kind = None
        if kind is None:
            sys.stdout.write("healthy: PID 1 is not the web server, a scheduler or a worker\n")
            return 0
    healthy, line = check(kind, environ)
    (sys.stdout if healthy else sys.stderr).write(line + "\n")
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
