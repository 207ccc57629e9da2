"""A test-only plugin whose job hangs (INSTATIC_TEST_EXTRA_APPS)."""
