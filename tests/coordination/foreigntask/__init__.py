"""A module a foreign task row points at: importing it records that it was imported.

A worker must refuse such a row without importing it (module-level code of any importable
module would run in the worker).
"""

IMPORTED = True


def task():
    """Never called."""
