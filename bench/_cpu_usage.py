"""CPU time of processes and of the machine, from ``/proc`` (Linux), to say where time went.

A benchmark that misses a target on a shared 2-core machine must show whether the cores
were busy, and with what: :func:`tree_cpu` sums the CPU seconds of a process and its
descendants (a scheduler and its worker processes, the PostgreSQL server and its backends),
:func:`machine_busy` the machine's busy core-seconds, whoever used them.
"""

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def children() -> dict[int, list[int]]:
    """Return every process's children, by parent pid."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def descendants(pid: int, tree: dict[int, list[int]] | None = None) -> list[int]:
    """Return ``pid``'s descendants (not ``pid`` itself)."""
    tree = children() if tree is None else tree
    found, todo = [], list(tree.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo += tree.get(child, [])
    return found


def cpu_seconds(pids: list[int]) -> float:
    """Return the CPU seconds (user + system) the running processes ``pids`` have used."""
    total = 0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])
    return total / _TICK


def tree_cpu(pid: int) -> float:
    """Return the CPU seconds of ``pid`` and its running descendants."""
    return cpu_seconds([pid, *descendants(pid)])


def machine_busy() -> tuple[float, float]:
    """Return (busy core-seconds, all core-seconds) since boot, from ``/proc/stat``."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / _TICK, sum(fields[:8]) / _TICK


def postmaster_pid(cluster) -> int:
    return int((cluster.datadir / "postmaster.pid").read_text().split("\n", 1)[0])
