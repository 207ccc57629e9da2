"""The start of a fault: its log line and record, and the leader it is aimed at."""

from devtools.chaos.clock import log
from devtools.chaos.records import Fault, Replica
from devtools.chaos.soak import Soak


def new_fault(soak: Soak, kind: str, target: str, context: str = "") -> Fault:
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
    group, leader_name, leader = pick_leader(soak)
    return new_fault(soak, kind, leader.name, f"{group} leader {leader_name}"), group, leader
