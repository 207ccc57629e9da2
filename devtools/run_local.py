"""``make run``: migrate the local SQLite site, make a first admin, run web + scheduler.

Both processes run in the foreground; Ctrl-C (or SIGTERM to this process) stops both and
waits for them, so the scheduler releases its lock and marks its node stopped.
"""

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
ADDRESS = os.environ.get("INSTATIC_RUN_ADDRESS", "127.0.0.1:8000")


def manage(*args: str) -> list[str]:
    return [sys.executable, str(BASE_DIR / "manage.py"), *args]


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
    # The children get their own session, so a Ctrl-C reaches only this process, which turns it
    # into exactly one SIGTERM each (a second signal would make the scheduler exit at once).
    children = [
        subprocess.Popen(manage("runserver", ADDRESS, "--noreload"), start_new_session=True),
        subprocess.Popen(manage("runscheduler"), start_new_session=True),
    ]
    stopping = []

    def stop(signum, frame):
        if stopping:
            for child in children:
                if child.poll() is None:
                    child.kill()
            return
        stopping.append(signum)
        print("\n  Stopping Instatic (Ctrl-C again to kill at once)...", flush=True)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while all(child.poll() is None for child in children):
            try:
                children[0].wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
    finally:
        for child in children:
            if child.poll() is None and not stopping:
                child.send_signal(signal.SIGTERM)
        for child in children:
            child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
