"""Django's SQLite backend, creating the database file's folder when it first connects.

Reading the settings creates nothing (``manage.py check`` leaves the disk as it was); a
process that opens the database, such as ``migrate``, ``runscheduler`` or the web server,
needs the folder, so the connection creates it, as SQLite itself creates the file.
"""

from pathlib import Path

from django.db.backends.sqlite3 import base


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        name = str(conn_params["database"])
        if not self.creation.is_in_memory_db(name) and not name.startswith("file:"):
            Path(name).parent.mkdir(parents=True, exist_ok=True)
        return super().get_new_connection(conn_params)
