"""`manage.py simulate_agents --base-url URL`: a simulated agent fleet over real HTTP.

Loopback only and bounded (agents, duration). SIGTERM or Ctrl-C stops it: agents finish
their current call, release what they hold, and the command exits 0.
"""

from __future__ import annotations

import logging
import signal
import time

from django.core.management.base import BaseCommand, CommandError

from leaseboard.sandbox import demo
from leaseboard.sandbox.fleet import Fleet, check_loopback


class Command(BaseCommand):
    help = "Run simulated agents against a local Leaseboard (demo tokens from demo_setup)."

    def add_arguments(self, parser):
        parser.add_argument("--base-url", required=True)
        parser.add_argument("--agents", type=int, default=demo.DEFAULT_AGENTS)
        parser.add_argument(
            "--duration", type=float, default=0, help="seconds to run; 0 = until stopped"
        )

    def handle(self, *args, base_url: str, agents: int, duration: float, **options):
        try:
            base_url = check_loopback(base_url)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if not 5 <= agents <= demo.MAX_AGENTS:
            raise CommandError(f"--agents must be between 5 and {demo.MAX_AGENTS}")
        if not 0 <= duration <= 24 * 3600:
            raise CommandError("--duration must be between 0 and 86400 seconds")
        tokens = demo.agent_tokens()
        if len(tokens) < agents:
            raise CommandError(
                f"{len(tokens)} demo agent token(s) in {demo.agents_file()}; "
                f"run `manage.py demo_setup --agents {agents}` first"
            )
        logging.getLogger("leaseboard.simulate").setLevel(logging.INFO)
        fleet = Fleet(
            base_url=base_url,
            tokens=dict(list(tokens.items())[:agents]),
            say=lambda msg: self.stdout.write(msg),
        )

        def stop(signum, frame):
            fleet.stop.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(f"simulating {agents} agents against {base_url} (run {fleet.run_id})")
        fleet.start()
        started = time.monotonic()
        last = started
        while not fleet.stop.wait(1.0):
            now = time.monotonic()
            if duration and now - started >= duration:
                break
            if now - last >= 15:
                last = now
                self.stdout.write(
                    "fleet: " + ", ".join(f"{k}={v}" for k, v in sorted(fleet.stats.items()))
                )
        fleet.shutdown()
        self.stdout.write(
            "fleet stopped: " + ", ".join(f"{k}={v}" for k, v in sorted(fleet.stats.items()))
        )
