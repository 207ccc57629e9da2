"""``make run``: migrate the local SQLite site, make a first admin, run web + scheduler.

Both processes run in the foreground; Ctrl-C (or SIGTERM to this process) stops both and
waits for them, so the scheduler releases its lock and marks its node stopped. A scheduler
that exits on its own is reported in one line and started again after a back-off, while the
web server keeps serving; the site stops only when the web server does.
"""

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
ADDRESS = os.environ.get("INSTATIC_RUN_ADDRESS", "127.0.0.1:8000")
#: Back-off of scheduler restarts: the first after 1 s, doubling up to this many seconds.
MAX_RESTART_DELAY = 30.0
#: A scheduler that ran this long before exiting counts as healthy: its restart starts at 1 s.
HEALTHY_RUN = 60.0
#: How often the launcher looks at its children.
POLL_INTERVAL = 0.5


def manage(*args: str) -> list[str]:
    return [sys.executable, str(BASE_DIR / "manage.py"), *args]


def restart_delay(failures: int) -> float:
    """Seconds to wait before starting the scheduler again after ``failures`` quick exits."""
    return min(MAX_RESTART_DELAY, 2.0 ** max(0, failures - 1))


def quick_exits(previous: int, ran_for: float) -> int:
    """Count of quick exits in a row, after one that ran ``ran_for`` seconds."""
    return 1 if ran_for >= HEALTHY_RUN else previous + 1


def exit_description(returncode: int) -> str:
    """How a child process ended, in words: ``exit code 1`` or ``killed by SIGKILL``."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def ensure_admin() -> None:
    """Create the ``admin`` superuser on the very first run and print its password once."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    if user_model.objects.filter(is_superuser=True).exists():
        return
    password = secrets.token_urlsafe(12)
    user_model.objects.create_superuser("admin", "admin@localhost", password)
    print(
        "\n  Created the admin user for this site (shown only this once):\n"
        f"    user: admin    password: {password}\n"
        "  Change it any time with: .venv/bin/python manage.py changepassword admin\n",
        flush=True,
    )


def start(*args: str) -> subprocess.Popen:
    # Each child gets its own session, so a Ctrl-C reaches only this process, which turns it
    # into exactly one SIGTERM each (a second signal would make the scheduler exit at once).
    return subprocess.Popen(manage(*args), start_new_session=True)


class Site:
    """The web server and the scheduler of ``make run``, with the scheduler supervised."""

    def __init__(self) -> None:
        self.web = start("runserver", ADDRESS, "--noreload")
        self.scheduler: subprocess.Popen | None = start("runscheduler")
        self.scheduler_started = time.monotonic()
        self.restart_at: float | None = None
        self.failures = 0
        self.stopping = False

    def children(self) -> list[subprocess.Popen]:
        return [child for child in (self.web, self.scheduler) if child is not None]

    def stop(self, signum, frame) -> None:
        """First signal: SIGTERM each child once; second: kill them at once."""
        if self.stopping:
            for child in self.children():
                if child.poll() is None:
                    child.kill()
            return
        self.stopping = True
        print("\n  Stopping Instatic (Ctrl-C again to kill at once)...", flush=True)
        self.terminate()

    def terminate(self) -> None:
        for child in self.children():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    def supervise_scheduler(self, now: float) -> None:
        """Report a scheduler that exited and start it again when its back-off has passed."""
        if self.scheduler is not None and self.scheduler.poll() is not None:
            self.failures = quick_exits(self.failures, now - self.scheduler_started)
            delay = restart_delay(self.failures)
            print(
                f"  The scheduler stopped ({exit_description(self.scheduler.returncode)}); "
                f"scheduled posts wait until it is back. Starting it again in {delay:g} s.",
                flush=True,
            )
            self.scheduler = None
            self.restart_at = now + delay
        if self.scheduler is None and self.restart_at is not None and now >= self.restart_at:
            self.scheduler = start("runscheduler")
            self.scheduler_started = now
            self.restart_at = None

    def run(self) -> int:
        try:
            while self.web.poll() is None and not (self.stopping and self.scheduler_done()):
                if not self.stopping:
                    self.supervise_scheduler(time.monotonic())
                try:
                    self.web.wait(timeout=POLL_INTERVAL)
                except subprocess.TimeoutExpired:
                    pass
            if not self.stopping:
                print(
                    f"  The web server stopped ({exit_description(self.web.returncode)}); "
                    "stopping Instatic.",
                    flush=True,
                )
        finally:
            if not self.stopping:
                self.terminate()
            for child in self.children():
                child.wait()
        return 0 if self.stopping else 1

    def scheduler_done(self) -> bool:
        return self.scheduler is None or self.scheduler.poll() is not None


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "instatic.settings")
    os.environ.setdefault("DJANGO_DEBUG", "1")
    os.chdir(BASE_DIR)
    subprocess.run(manage("migrate", "--noinput", "-v", "0"), check=True)
    ensure_admin()
    print(
        f"  Instatic: http://{ADDRESS}/  admin: http://{ADDRESS}/admin/  (Ctrl-C stops)\n",
        flush=True,
    )
    site = Site()
    signal.signal(signal.SIGTERM, site.stop)
    signal.signal(signal.SIGINT, site.stop)
    return site.run()


if __name__ == "__main__":
    sys.exit(main())
