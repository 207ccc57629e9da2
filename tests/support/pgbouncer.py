"""A throwaway PgBouncer in front of the test database, for tests that go through the pooler."""

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

from devtools import pgbouncer


@contextmanager
def bouncer_for_test_database(**extra_config) -> Iterator[pgbouncer.PgBouncer]:
    """Start PgBouncer (transaction pooling, ``extra_config`` added to its settings) in front
    of the test run's database, and stop it after.

    Skips when pgbouncer is not installed, except on CI, whose set-up installs it: there a
    missing binary is a failure, so a broken install is never hidden by skips.
    """
    if pgbouncer.find_binary() is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("pgbouncer is missing; .ci/run installs Debian's pgbouncer package")
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    settings_dict = connection.settings_dict
    with pgbouncer.PgBouncer(
        upstream_port=int(settings_dict["PORT"]),
        dbname=settings_dict["NAME"],
        extra_config=extra_config or None,
    ) as server:
        yield server
