"""How starved of CPU the machine was over a fault, from Linux's pressure stall information.

A bound on a fault's recovery holds the nodes to a time; on a machine whose cores something
else also keeps busy, every hop of that recovery (a process woken, a statement answered) waits
for a core first. A fault that misses its bound says how much of its window at least one task
waited for a CPU (``/proc/pressure/cpu``, "some"), so a failure on a starved machine reads as
such beside the nodes' own account.
"""

from pathlib import Path

PRESSURE = Path("/proc/pressure/cpu")


def cpu_stall_total(path: Path = PRESSURE) -> int | None:
    """Return the microseconds since boot in which at least one task waited for a CPU, or
    ``None`` where the kernel does not report it."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return parse_stall_total(text)


def parse_stall_total(text: str) -> int | None:
    """Return the "some" line's ``total`` of a pressure file's ``text`` (microseconds)."""
    for line in text.splitlines():
        if line.startswith("some "):
            for field in line.split()[1:]:
                name, _, value = field.partition("=")
                if name == "total" and value.isdigit():
                    return int(value)
    return None


def stalled_share(start: int | None, end: int | None, seconds: float) -> float | None:
    """Return the share of ``seconds`` in which at least one task waited for a CPU, from the
    stall totals at its start and end; ``None`` when unknown."""
    if start is None or end is None or seconds <= 0:
        return None
    return min(1.0, max(0.0, (end - start) / 1e6 / seconds))


def stalled_words(start: int | None, end: int | None, seconds: float) -> str:
    """Return a line for a fault's account: how starved of CPU the machine was over it."""
    share = stalled_share(start, end, seconds)
    if share is None:
        return "CPU pressure over the fault: not reported by this kernel"
    return (
        f"CPU pressure over the fault ({seconds:.2f} s): at least one task waited for a CPU"
        f" {share:.0%} of the time"
    )
