"""A test-only plugin with a job the scheduler cannot plan (INSTATIC_TEST_EXTRA_APPS)."""
