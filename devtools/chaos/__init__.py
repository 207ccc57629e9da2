"""Chaos soak: run the real system under random faults, then check its invariants.

``make chaos`` (or ``python -m devtools.chaos --duration 600 --seed 1``) starts a throwaway
PostgreSQL (``--vendor postgresql-replicated``, what ``make chaos`` uses: a primary with a
synchronous hot standby; ``--vendor mariadb``: MariaDB), several ``runscheduler`` replicas, a
web process, a stream of editors scheduling, rescheduling and cancelling posts (with quiet
spells: everything postponed, then one lone post that only a wake-up of the leader gets out on
time), a stream of releases (every few seconds a few to a few dozen new drafts, sometimes with
takedowns of live posts, scheduled 2-10 s ahead; a quiet spell moves those due around its lone
post past it), and jobs at several cadences (transactional, claim-first, one that sometimes
fails, one that sometimes hangs, one that works 3 s per run, one kept for catch-ups, a probe
that runs every 10 s in the publishing group beside the publish jobs, and two that run on worker
processes: a transactional one every second and a claim-first one every 2 s that retries
abandoned runs). Each scheduler replica runs one worker process (``--workers 1``) and the soak
runs a worker-only node (``runworker --processes 1``). Two more replicas run a group of their
own in lease lock mode (``INSTATIC_LOCK_MODE=transaction``), which must never share a group with
session locks; on PostgreSQL they reach it only through a real PgBouncer in transaction pooling
mode (a pool of 4, ``server_round_robin``), which follows the primary after a failover (on
MariaDB, which has no lease mode, they run it with ``GET_LOCK`` like the others, and their
SIGTERM fault times a MariaDB follower's and leader's exit).

Meanwhile it injects faults at random: SIGKILL, SIGSTOP then SIGCONT, SIGTERM and restart,
termination of the leader's database sessions, a database restart (PostgreSQL
``pg_ctl restart -m fast``, MariaDB ``mysqladmin shutdown`` and a start), a network partition
of one replica; run-now requests (sometimes followed by a SIGKILL of the leader); a catch-up of
1,800 slots; ``runscheduler --once`` next to the replicas; termination of only the leader's lock
session, and a database restart, while a slow claim-first run is in progress; a row lock held
on a due post; SIGTERM of a lease-mode replica; two faults at once (the follower first in line
for a group's lock frozen, then the group's leader SIGKILLed: the server grants the lock to the
frozen waiter); a SIGKILL of the leader while the slow claim-first job runs on it; with a
standby, a failover (the primary stopped with ``-m immediate``, the standby promoted, the old
primary rebuilt as the new standby); and, behind PgBouncer, the lease holder frozen between a
run's fence and its ``COMMIT`` (``freeze-at-commit``, with ``devtools/commit_gate.py``) and a
restart of the PgBouncer; and, aimed at a worker process (a child of a replica or of the
worker-only node) with a run in hand when one can be caught, a SIGKILL, a SIGSTOP for longer
than the lease then SIGCONT, and the termination of its database sessions. Every other fault
hits the workers too: a replica's workers die, freeze and are cut off with it.
``--faults kill,freeze-at-commit`` runs only the kinds it names.

Each replica lives in a network namespace this script creates, joined to the host by a veth
pair whose host end carries a private address the database listens on; a partition takes that
link down, so the replica's packets are silently dropped (no FIN, no RST) until it comes back.
Traffic only ever goes to loopback or to those namespaces. Without root (or ``ip netns``) the
partition fault is left out and reported as such. Soaks at once on one machine (``make test``'s
MariaDB and PostgreSQL runs) each take a private network of their own, ``10.<octet>.0.0/16``,
and first remove the links a killed soak left in it (they would take the replicas' answers).
Processes that do not all lead or serve within two minutes stop the soak with what is missing
and the end of each one's log; SIGTERM stops it as an error does, after printing where it was,
so everything it started goes with it.

Afterwards it checks the invariants (``devtools/chaos/invariants.py``, one function each, from
the database, the logs and the faults' records; for the workers: every queued slot settled, no
transactional slot's effect twice, no attempt started twice, abandoned runs retried, no task row
left running, the queue wait bounded outside fault windows, every pool full; for the releases:
every one due before the settle phase ended went out, all of its posts' changes or none, each
post's one event at the release's ``released_at``, never before its time, no post changed twice
by one release; for the outbox (``outbox_checks``): every published event delivered to the
transactional subscriber exactly once and to the webhook, every webhook id received and none
recorded succeeded twice, and with no fault near, within a bound under both fallback
schedules, so a lost wake-up breaks it), prints a table of faults (with the time until work
resumed per fault kind: a new leader, a served run-now request, a finished catch-up, a
published post) and invariants, and exits non-zero if any invariant broke. The same seed
gives the same fault plan.

Modules: ``config`` (the soak's jobs, lease and bounds), ``databases`` (the server it runs on),
``network`` (the replicas' namespaces), ``records`` and ``soak`` (what it started and saw),
``editors`` (the editors' stream), ``releases`` (the release stream, and what the checks read of
releases), ``faults`` (one function per fault kind), ``evidence``, ``invariants``,
``release_checks`` and ``outbox_checks`` (the checks), ``report`` (the tables), ``run`` (the
command line and the soak's phases).
"""
