"""A test-only plugin a multi-process test installs on one node (INSTATIC_TEST_EXTRA_APPS)."""
