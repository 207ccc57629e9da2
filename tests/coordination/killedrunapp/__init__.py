"""A test-only app with long claim-first jobs, to kill a node mid-run (INSTATIC_TEST_EXTRA_APPS)."""
