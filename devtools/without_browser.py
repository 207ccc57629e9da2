"""A pytest plugin that deselects the tests that drive a browser (the ``browser`` fixture).

The engine's run on Django 6.1 loads it (``-p devtools.without_browser``): its venv has no
Playwright, and the admin's pages those tests read are tested by the runs on 5.2 LTS. Pytest's
summary counts them as deselected, not skipped, as it counts the tests that run on one vendor
only (tests/conftest.py).
"""


def pytest_collection_modifyitems(config, items):
    kept, browsing = [], []
    for item in items:
        (browsing if "browser" in getattr(item, "fixturenames", ()) else kept).append(item)
    if browsing:
        config.hook.pytest_deselected(items=browsing)
        items[:] = kept
