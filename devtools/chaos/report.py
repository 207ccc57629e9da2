"""The soak's report: the faults table, the invariants table, and the nodes' own trouble."""

from collections import defaultdict
from pathlib import Path

from devtools.chaos.config import LATE_BOUND, LEASE_REPLICAS
from devtools.chaos.evidence import disturbances
from devtools.chaos.faults import fault_kinds
from devtools.chaos.records import Fault
from devtools.chaos.releases import release_rows
from devtools.chaos.soak import Soak


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def fault_notes(faults: list[Fault]) -> str:
    """Up to two distinct notes of a fault kind, problems first."""
    problems = sorted({f"!! {f.problem}" for f in faults if f.problem})
    notes = problems + sorted({f.note for f in faults if f.note and not f.problem})
    more = f" (+{len(notes) - 2} more)" if len(notes) > 2 else ""
    return "; ".join(notes[:2]) + more


def release_summary(soak: Soak) -> str:
    """How many releases the release stream made and how many went out, and how late."""
    made = soak.releases.values()
    scheduled = sum(1 for record in made if record.release_at is not None)
    released = [row for row in release_rows(soak).values() if row.status == "released"]
    late = [(row.lateness, row.release_at) for row in released if row.lateness is not None]
    spans = disturbances(soak)
    unexplained = sum(
        1
        for lateness, due in late
        if lateness > LATE_BOUND
        and not any(span.explains(None, soak.local_time(due), lateness) for span in spans)
    )
    times = [lateness for lateness, _ in late]
    lateness = (
        f"lateness max {max(times):.2f} s, p99 {percentile(times, 99):.2f} s"
        f" ({unexplained} over {LATE_BOUND:.0f} s with no fault near)"
        if times
        else "no lateness"
    )
    return (
        f"releases: {len(made)} made, {scheduled} scheduled"
        f" ({sum(len(record.posts) for record in made)} items,"
        f" {soak.release_ops['takedown']} takedowns,"
        f" {soak.release_ops['postpone']} postponed by a quiet spell),"
        f" {len(released)} released; {lateness}; {soak.release_errors} release errors"
    )


def report(soak: Soak, results, duration: float) -> bool:
    print(
        f"\nChaos soak: {duration:.0f} s, seed {soak.args.seed}, {soak.args.replicas} replicas"
        f" (+{len(LEASE_REPLICAS)} lease-mode), {len(soak.faults)} faults, editor ops"
        f" {dict(soak.editor_ops)} ({soak.editor_errors} editor errors)"
    )
    print(f"  {release_summary(soak)}")
    print(f"\n  {'fault':<17} {'count':>5} {'takeover max':>13} {'p95':>7}  notes")
    by_kind = defaultdict(list)
    for fault in soak.faults:
        by_kind[fault.kind].append(fault)
    for kind in fault_kinds(soak.db, soak.args.faults):
        faults = by_kind.get(kind, [])
        times = [f.takeover for f in faults if f.takeover is not None]
        missing = sum(1 for f in faults if f.takeover is None and f.expects_takeover)
        tmax = f"{max(times):.2f} s" if times else "-"
        p95 = f"{percentile(times, 95):.2f} s" if times else "-"
        extra = (f"{missing} without takeover; " if missing else "") + fault_notes(faults)
        print(f"  {kind:<17} {len(faults):>5} {tmax:>13} {p95:>7}  {extra}")
    print(f"\n  {'invariant':<52} held   detail")
    ok = True
    for name, held, detail in results:
        ok &= held
        print(f"  {name:<52} {'yes' if held else 'NO':<6} {detail}")
    takeovers_missing = sum(1 for f in soak.faults if f.takeover is None and f.expects_takeover)
    if takeovers_missing:
        print(f"\n  {takeovers_missing} fault(s) never saw work resume in time")
        ok = False
    print(f"\n  result: {'ALL INVARIANTS HELD' if ok else 'INVARIANT BROKEN'}")
    print_accounts(soak.faults)
    return ok


def print_accounts(faults: list[Fault], lines: int = 40) -> None:
    """Print the nodes' log lines each fault with a problem gathered about itself."""
    for fault in faults:
        if fault.problem and fault.account:
            print(f"--- the nodes' account of: {fault.problem}", flush=True)
            print("\n".join(fault.account[:lines]), flush=True)


def print_trouble(workdir: Path, lines: int = 12) -> None:
    """Print each node's last warnings and errors: where a CI log must show what happened."""
    for path in sorted(workdir.glob("*.log")):
        trouble = [
            line
            for line in path.read_text(errors="replace").splitlines()
            if " WARNING " in line or " ERROR " in line
        ]
        if trouble:
            print(f"--- {path.name}: last warnings and errors", flush=True)
            print("\n".join(line[:300] for line in trouble[-lines:]), flush=True)
