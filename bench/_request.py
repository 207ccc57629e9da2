"""Ask the benchmarked site's leader for runs on request, through the product's own service.

``python -m bench._request`` (Django set up from the site's env, ``bench._settings``) reads
lines of job names from stdin; each line's runs are requested in one transaction
(``coordination.services.request_run``, which also wakes the group's leader), then ``ok`` is
printed. One process for every request, so a request costs a transaction, not an interpreter.
"""

import sys

import django


def main() -> None:
    django.setup()
    from django.db import transaction

    from coordination.services import request_run

    for line in sys.stdin:
        names = line.split()
        with transaction.atomic():
            for name in names:
                if not request_run(name, requested_by="bench"):
                    raise SystemExit(f"{name}: no job state yet (the scheduler creates it)")
        print("ok", flush=True)


if __name__ == "__main__":
    main()
