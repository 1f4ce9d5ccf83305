"""`make chaos` (`python -m bench.chaos`): fencing under faults, with real processes, on
loopback, bounded in time.

Starts its own PostgreSQL database, two gunicorn web servers, a Celery worker with embedded
beat on its own Redis db and queue, a recipient (recipient.py, own database, ledger row
and guard `check_in` in one transaction) and N SDK agents in a few processes.
Agents loop acquire → checkpoint → effects (server proposal, then the recipient with
X-Lease-Epoch / X-Fencing-Token) → release. Faults: pauses longer than the ttl followed by
an effect anyway, threads abandoning leases, agent processes SIGKILLed, the Celery worker
SIGKILLed (aimed at an open sweep transaction) and restarted, PostgreSQL and Redis restarts
(unless --no-restarts), takeovers approved mid-flight and handed back (or left to lapse).

Two more recipients never hear from a successor: only paused holders' (past the ttl) and
stalled holders' (past jeopardy; an operator takes a lease in jeopardy over every 1.5 s
with 50 agents)
late sends reach them, with the token of the effect authorized just before they stopped.
One of them registers for Leaseboard's epoch-advance notices (`--no-epoch-notices`: not).

Then `check()` proves, and prints counts for: (1) no effect accepted below the recipient's
high-water mark; (2) no two holders with live standing on one work item at once; (3) every
attempted effect is in the recipient's ledger; (4) every expired lease alerted exactly once;
(5) no late send accepted once a successor could act, and none past its lease's expiry
(late.py, with the epoch-notice figures).
Exit status 1 if any check fails. `--json PATH` writes the results (tests/test_chaos.py).

Attempt accounting (check 3): an agent logs an intent line before each recipient call and a
result line after. Connect failures are "not attempted". An answer from the recipient
(201 accepted, 409/403 refused) is "definite" and must have a ledger row with that status.
Timeouts, dropped connections, 5xx (the recipient's database restarting mid-request) and
intents of SIGKILLed agents are "indeterminate": the request may or may not have committed,
so they are counted (with and without a ledger row) but cannot fail the check.

Modules: orchestrator.py (the run), services.py (processes, PostgreSQL/Redis restarts),
agents.py (the agent processes), faults.py (kills, restarts, takeovers), checks.py (the
four checks), late.py (the fifth), recipient.py (the recipients under test), __main__.py
(the command line).
"""

from bench.common import sayer

say = sayer("chaos")
