"""A database backend whose vendor the leader lock does not support (``test_checks``).

A real SQLite database under another vendor name, as a third-party backend (SQL Server,
Oracle, CockroachDB's own) would present itself: the system checks must refuse it by name.
"""
