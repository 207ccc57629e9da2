"""The machine's process table as ``/proc`` shows it: the children of a process, for the
tests and the chaos soak that start processes and signal them.

A process can exit between the listing of ``/proc`` and the read of its ``stat``; the read
then fails (``ProcessLookupError`` for a directory still listed, ``FileNotFoundError`` once it
is gone) and the process is simply not there. ``Path.glob`` checks each match with a ``stat``
that raises on the first, so the table is read with one ``scandir`` and a read per entry.
"""

import os
from typing import NamedTuple


class ProcessRow(NamedTuple):
    """One process: its pid, state letter (``Z`` for a zombie) and parent's pid."""

    pid: int
    state: str
    ppid: int


def processes() -> list[ProcessRow]:
    """Return every process that was still there when its ``stat`` was read."""
    rows = []
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as stat:
                    # The command name (field 2) is in parentheses and may hold spaces.
                    fields = stat.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone meanwhile
            rows.append(ProcessRow(int(entry.name), fields[0], int(fields[1])))
    return rows


def live_children(parent: int) -> list[int]:
    """Return the pids of ``parent``'s children that are not zombies."""
    return [row.pid for row in processes() if row.ppid == parent and row.state != "Z"]
