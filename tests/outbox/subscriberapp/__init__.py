"""A test-only plugin app: a transactional subscriber that writes an ``Effect`` per event."""
