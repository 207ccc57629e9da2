"""The soak's command line and phases: start, inject faults, settle, check, report, stop."""

import argparse
import faulthandler
import fcntl
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from devtools import chaos, commit_gate
from devtools.chaos import databases, webhooks
from devtools.chaos.clock import log
from devtools.chaos.config import (
    BASE_DIR,
    COMMIT_GATE_KEY,
    DELIVERY_FALLBACK,
    DISPATCH_FALLBACK,
    JOBS,
    LEASE,
    LEASE_GROUP,
    LEASE_JOB,
    LEASE_REPLICAS,
    REVIEW_ENV,
    WORKER_JOBS,
)
from devtools.chaos.editors import editor_stream
from devtools.chaos.faults import fault_kinds, inject, parse_fault_selection
from devtools.chaos.faults.processes import reap_once
from devtools.chaos.image_checks import image_probe
from devtools.chaos.invariants import check_invariants
from devtools.chaos.network import Network
from devtools.chaos.queries import (
    dead_running_sql,
    pending_releases_sql,
    undelivered_events_sql,
    unsettled_worker_runs_sql,
)
from devtools.chaos.releases import release_stream
from devtools.chaos.report import print_trouble, report
from devtools.chaos.soak import Soak, child_pids
from devtools.chaos.worker_checks import worker_pools_running
from devtools.servers import exited, free_port, stop_pid


def setup_django(env: dict) -> str:
    """Configure Django in this process (editors' stream, run-now); return the publish job."""
    for key in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "INSTATIC_TEST_EXTRA_APPS"):
        os.environ[key] = env[key]
    os.environ["INSTATIC_VAR_DIR"] = env["INSTATIC_VAR_DIR"]
    os.environ.update(REVIEW_ENV)
    import django

    django.setup()
    from publishing.job_names import PUBLISH_JOB

    return PUBLISH_JOB


#: How long the soak's processes may take to lead every group and serve every worker process
#: (seconds, generous for a busy machine): past it, the soak stops and says what is missing.
READY_WITHIN = 120.0


def wait_for_leaders(soak: Soak, within: float = READY_WITHIN) -> None:
    """Wait until every group leads and every worker process serves (its node registered).

    Raises :class:`NotReady`, naming what is missing, with each process's state and the end of
    its log, when that takes longer than ``within`` seconds: a soak whose replicas never start
    must end with the reason, not hang until its caller kills it (and leaves its processes
    behind).
    """
    deadline = time.monotonic() + within
    groups = (*soak.session_groups, LEASE_GROUP)
    expected = sum(r.workers for r in soak.replicas.values())
    while (missing := not_ready(soak, groups, expected)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if missing:
        accounts = [
            f"--- {r.name}, {'running' if r.alive() else f'exited ({r.process.returncode})'};"
            f" its log ends:\n{log_tail(r)}"
            for r in soak.replicas.values()
        ]
        raise NotReady(
            "\n".join([f"not ready after {within:.0f} s: {'; '.join(missing)}", *accounts])
        )
    soak.ready_wall = time.time()


def log_tail(replica, lines: int = 15) -> str:
    """The last ``lines`` lines of ``replica``'s log."""
    text = replica.log_path.read_text(errors="replace") if replica.log_path.exists() else ""
    return "\n".join(line[:300] for line in text.splitlines()[-lines:])


class NotReady(Exception):
    """The soak's processes did not all lead or serve in time."""


def not_ready(soak: Soak, groups: tuple[str, ...], expected: int) -> list[str]:
    """Return what is not ready yet: groups without a leader, worker processes not serving."""
    missing = [f"no leader in group {group!r}" for group in groups if soak.leader(group) is None]
    serving = len(soak.worker_targets())
    if serving < expected:
        missing.append(f"{serving} of {expected} worker processes serving")
    return missing


def inject_faults(soak: Soak, started: float) -> None:
    """Inject faults until the duration is up: every kind once per round, rounds shuffled.

    The pause between faults is short so a 10-minute soak injects at least 150 of them.
    """
    rng = soak.rng
    only = soak.args.faults
    plan = fault_kinds(soak.db, only)
    while time.monotonic() - started < soak.args.duration:
        time.sleep(rng.uniform(0.2, 1.0))
        reap_once(soak)
        if time.monotonic() - started >= soak.args.duration:
            break
        if not plan:
            plan = fault_kinds(soak.db, only)
            rng.shuffle(plan)
        soak.faults.append(inject(soak, plan.pop()))


def healed(soak: Soak, end_db) -> bool:
    """Whether everything the settle phase waits for is done (see :func:`settle`)."""
    due = soak.scalar(
        "SELECT count(*) FROM publishing_post WHERE status = 'scheduled'"
        " AND publish_at < %s AND last_error = ''",
        (end_db,),
    )
    return bool(
        not due
        and not soak.scalar(pending_releases_sql())
        and not soak.scalar(undelivered_events_sql())
        and not soak.scalar(dead_running_sql(soak.db))
        and not soak.scalar(unsettled_worker_runs_sql(), (end_db, *WORKER_JOBS))
        and worker_pools_running(soak, end_db)[0]
    )


def wait_healed(soak: Soak, end_db, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not healed(soak, end_db):
        time.sleep(0.5)


def settle(soak: Soak, end_db) -> None:
    """Let the system heal before the checks.

    Everything due before the end gets published, every release the release stream scheduled
    goes out (the last is due seconds after the end), every publish event delivered to the
    subscriber and the webhook, every workers run queued before it ends,
    every worker pool has started its killed or fenced workers again, leases of killed nodes
    expire, ``--once``
    processes finish, and at least ``lease + 2 x period`` (the slowest job's) passes after the
    last fault, the time the progress invariant allows. Posts due after the end (the editors'
    last, a quiet spell's postponed ones) go live during that wait: their events are waited
    for too, as long as the dispatcher's own look for undispatched events may take.
    """
    log("settling")
    reap_once(soak, wait=30)
    wait_healed(soak, end_db, 30 + 2 * LEASE)
    last_fault = max((f.ended for f in soak.faults if f.ended), default=time.monotonic())
    progress_at = last_fault + LEASE + 2 * max(job.period for job in JOBS.values())
    time.sleep(max(0.0, progress_at - time.monotonic()))
    # Only as long as something is left: a settled soak goes on at once.
    wait_healed(soak, end_db, DISPATCH_FALLBACK + DELIVERY_FALLBACK)
    soak.settled_db = soak.db_now()


#: Soaks at once on one machine each take a network of their own (``10.<octet>.0.0/16``, the
#: addresses of their namespaces' links), held by a lock file per octet so that two never
#: route each other's packets: as many soaks as octets run side by side (``make test``'s
#: MariaDB and PostgreSQL runs each run one), and any more wait for one to end.
NETWORK_OCTETS = (231, 232, 233, 234)


def network_lock(octet: int) -> Path:
    return Path(f"/tmp/instatic-chaos-{octet}.lock")


def take_network() -> tuple[int, IO]:
    """Return the first free network's octet and its lock file, held (closing the file lets
    it go); with none free, wait for the first."""
    for octet in NETWORK_OCTETS:
        held = open(network_lock(octet), "a")  # noqa: SIM115 - returned, held by the caller
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return octet, held
        except BlockingIOError:
            held.close()
    octet = NETWORK_OCTETS[0]
    log(f"{len(NETWORK_OCTETS)} soaks run on this machine; waiting for {network_lock(octet)}")
    held = open(network_lock(octet), "a")  # noqa: SIM115 - returned, held by the caller
    fcntl.flock(held, fcntl.LOCK_EX)
    return octet, held


def run(args: argparse.Namespace) -> bool:
    octet, held = take_network()
    with held:
        return run_alone(args, octet)


def run_alone(args: argparse.Namespace, octet: int) -> bool:
    rng = random.Random(args.seed)
    network = Network(args.replicas, tag=str(os.getpid() % 1000), octet=octet)
    network.create()
    workdir = Path(
        subprocess.check_output(["mktemp", "-d", "/tmp/instatic-chaos-XXXX"], text=True).strip()
    )
    db = databases.make(args.vendor)
    soak = None
    keep = True  # an error before the report keeps the logs too
    try:
        db.start(["127.0.0.1"] + [network.host_address(i) for i in network.created], network.cidr)
        log(f"{db.label} at {db.url()}")
        soak = Soak(args, db, network, workdir, rng)
        env = soak.env()
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=BASE_DIR,
            env=env,
            check=True,
        )
        soak.publish_job = setup_django(env)
        soak.webhooks, soak.webhook_name = webhooks.start(network.service_address(), args.seed)
        soak.measure_clock()
        if db.behind_pgbouncer:
            for statement in commit_gate.install_sql(job=LEASE_JOB, key=COMMIT_GATE_KEY):
                soak.query(statement)
            soak.start_bouncer()
        for i in range(1, args.replicas + 1):
            soak.start_replica(i)
        for i in LEASE_REPLICAS:
            soak.start_replica(i, lease=True)
        soak.start_worker_node()
        soak.web_port = free_port()
        soak.web = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{soak.web_port}", "--noreload"],
            cwd=BASE_DIR,
            env={**env, "DJANGO_DEBUG": "1"},
            stdout=open(workdir / "web.log", "wb"),  # noqa: SIM115 - owned by the child
            stderr=subprocess.STDOUT,
        )
        wait_for_leaders(soak)
        streams = [
            threading.Thread(target=target, args=(soak, args.seed), daemon=True)
            for target in (editor_stream, release_stream, image_probe)
        ]
        for stream in streams:
            stream.start()
        started = time.monotonic()
        inject_faults(soak, started)
        soak.stop_stream.set()
        for stream in streams:
            stream.join(30)
        end_db = soak.db_now()
        settle(soak, end_db)
        results = check_invariants(soak, end_db)
        code = report(soak, results, time.monotonic() - started)
        # A broken invariant is only worth something with the nodes' own account of it.
        keep = args.keep_logs or not code
        return code
    finally:
        if soak is not None:
            stop_everything(soak)
        db.stop()
        stop_strays()
        network.destroy()
        if keep:
            if soak is not None:
                print_trouble(workdir)
            log(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def stop_strays() -> None:
    """Stop the soak's child processes still running once everything it knows of has been
    stopped: one it started as SIGTERM came, before it kept a record of it."""
    for pid in [pid for pid in child_pids(os.getpid()) if not exited(pid)]:
        log(f"stopping process {pid}, started by the soak and not yet recorded")
        try:
            stop_pid(pid, timeout=20)
        except TimeoutError as exc:
            log(str(exc))


def stop_everything(soak: Soak) -> None:
    soak.stop_stream.set()
    processes = [r.process for r in soak.replicas.values()] + [o.process for o in soak.once_runs]
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.terminate()
    for process in processes:
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if soak.web is not None:
        soak.web.terminate()
        soak.web.wait(20)
    if soak.bouncer is not None:
        soak.bouncer.stop()
    if soak.webhooks is not None:
        soak.webhooks.__exit__(None, None, None)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.chaos", description=chaos.__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--duration", type=float, default=float(os.environ.get("CHAOS_DURATION", 180))
    )
    parser.add_argument("--seed", type=int, default=int(os.environ.get("CHAOS_SEED", 1)))
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--keep-logs", action="store_true")
    parser.add_argument(
        "--vendor",
        choices=sorted(databases.DATABASES),
        default=os.environ.get("CHAOS_VENDOR", "postgresql"),
        help="the database server to soak on (default postgresql)",
    )
    parser.add_argument(
        "--faults",
        default="",
        help="only these fault kinds, comma-separated (default: every kind that applies)",
    )
    args = parser.parse_args(argv)
    if not 3 <= args.replicas <= 5:
        parser.error("--replicas must be 3 to 5")
    try:
        args.faults = parse_fault_selection(args.faults, databases.DATABASES[args.vendor])
    except ValueError as exc:
        parser.error(str(exc))
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    return 0 if run(args) else 1


def stop_on_sigterm(signum, frame) -> None:
    """Stop the soak on SIGTERM as on an error: say where it was (every thread's stack), then
    stop its processes and its server and remove its namespaces; a second SIGTERM is ignored,
    so that stopping is never cut short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    log("SIGTERM: stopping the soak; where it was:")
    faulthandler.dump_traceback(file=sys.stdout, all_threads=True)
    raise SystemExit(128 + signum)
