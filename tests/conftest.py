"""Suite-wide fixtures: vendor markers, and helpers for tests that start real processes."""

import pytest
from django.db import connection

VENDOR_MARKERS = {"postgresql", "mysql", "sqlite"}


def pytest_collection_modifyitems(config, items):
    vendor = connection.vendor
    for item in items:
        wanted = VENDOR_MARKERS & {m.name for m in item.iter_markers()}
        if wanted and vendor not in wanted:
            item.add_marker(
                pytest.mark.skip(reason=f"needs {'/'.join(sorted(wanted))}, not {vendor}")
            )
        if item.get_closest_marker("server") and vendor == "sqlite":
            item.add_marker(pytest.mark.skip(reason="needs a database server, not sqlite"))


def pytest_report_header(config):
    return f"instatic: database vendor {connection.vendor} ({connection.settings_dict['NAME']})"
