"""A test-only plugin with bad job declarations next to a good one (INSTATIC_TEST_EXTRA_APPS)."""
