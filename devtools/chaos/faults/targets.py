"""The start of a fault: its log line and record, and the leader it is aimed at."""

from devtools.chaos.clock import log
from devtools.chaos.records import Fault, Replica
from devtools.chaos.soak import Soak


def new_fault(soak: Soak, kind: str, target: str, context: str = "") -> Fault:
    """Log the fault about to be injected and return its record."""
    log(f"fault {kind} -> {target}" + (f" ({context})" if context else ""))
    return Fault(kind, target)


def pick_leader(soak: Soak) -> tuple[str, str | None, Replica]:
    """Return a random session group, its leader's name, and that replica (or a live one)."""
    group = "plugins" if soak.rng.random() < 0.5 else "publishing"
    fallback = soak.rng.choice(soak.session_replicas())
    leader_name = soak.leader(group)
    leader = soak.by_name(leader_name)
    if leader is None or leader.lease or not leader.alive():
        leader = fallback
    return group, leader_name, leader


def leader_fault(soak: Soak, kind: str) -> tuple[Fault, str, Replica]:
    """Start a fault of ``kind`` aimed at a random group's leader; return it, the group, the
    replica."""
    group, leader_name, leader = pick_leader(soak)
    return new_fault(soak, kind, leader.name, f"{group} leader {leader_name}"), group, leader


def gap_after_kill(fault: Fault, seconds: float, bound: float, *, what: str, who: str) -> bool:
    """Record that ``what`` happened ``seconds`` after the fault's kill; a problem naming ``who``
    past ``bound``. Return whether it was within the bound."""
    fault.lead_gap = seconds
    fault.note = f"{what} {seconds:.2f} s after the kill"
    if seconds > bound:
        fault.problem = f"{who} {what} {seconds:.2f} s after the kill"
    return seconds <= bound
