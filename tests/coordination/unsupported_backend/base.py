"""SQLite's backend under the vendor name ``unsupported``."""

from django.db.backends.sqlite3 import base


class DatabaseWrapper(base.DatabaseWrapper):
    vendor = "unsupported"
