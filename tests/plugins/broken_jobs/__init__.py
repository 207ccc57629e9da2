"""A test-only app whose jobs.py fails while importing (INSTATIC_TEST_EXTRA_APPS)."""
