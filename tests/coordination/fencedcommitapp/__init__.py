"""A test-only app with a transactional job whose commit a test freezes."""
