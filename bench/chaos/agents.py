"""Chaos agents: the child process that runs N SDK agents in threads (no Django), and the
parent's side of them (`Fleet`: start, SIGKILL and restart agent processes, read their logs).

An agent loops acquire → checkpoint → effects (server proposal, then the recipient with
X-Lease-Epoch / X-Fencing-Token) → release, sometimes pausing past the ttl and sending an
effect anyway, sometimes stalling past jeopardy (where an operator may take it over),
sometimes walking away from a lease. It logs an intent line before each recipient call and
a result line after (check 3 in checks.py reads them). A paused or stalled holder also
sends the token of the effect it had been authorized just before it stopped to the late
recipient, which never hears from a successor (check 5: `late_attempt`/`late_result`).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import PY

if TYPE_CHECKING:
    from bench.chaos.services import Services


class AgentLog:
    def __init__(self, path: str) -> None:
        self._f = open(path, "a", buffering=1)  # line-buffered: a SIGKILL loses no whole line
        self._lock = threading.Lock()

    def __call__(self, **rec: Any) -> None:
        rec["t"] = time.time()
        with self._lock:
            self._f.write(json.dumps(rec) + "\n")


def agent_process(cfg_path: str) -> int:
    import httpx

    from leaseboard_client import (
        Client,
        ClientTiming,
        LeaseError,
        LocalJeopardy,
        LockDelay,
        TransientError,
        WorkLeased,
    )
    from leaseboard_recipient.tokens import unverified_claims

    cfg = json.loads(Path(cfg_path).read_text())
    emit = AgentLog(cfg["log"])
    stop_at = time.monotonic() + cfg["run_s"]
    stop_file = Path(cfg["stop_file"])
    ttl_s = cfg["ttl_ms"] / 1000
    renew_s = cfg["ttl_ms"] * 3 / 10 / 1000
    timing = ClientTiming(
        request_timeout_s=renew_s / 2, renew_interval_s=renew_s, safety_margin_s=renew_s / 2
    )

    def order(token: str | None) -> list[int] | None:
        """The token's fencing order, (generation, epoch); a token without a generation
        is generation 0 (docs/design.md §5)."""
        claims = unverified_claims(token) if token else None
        return None if claims is None else [getattr(claims, "generation", 0), claims.epoch]

    def stopping() -> bool:
        return time.monotonic() >= stop_at or stop_file.exists()

    def run(agent: dict[str, Any]) -> None:
        name = agent["name"]
        rng = random.Random(f"{cfg['seed']}-{name}-{os.getpid()}")
        client = Client(agent["url"], agent["token"], timing=timing)
        rhttp = httpx.Client(base_url=cfg["recipient_url"], timeout=2.0)
        late_http = {
            role: httpx.Client(base_url=url, timeout=2.0)
            for role, url in cfg["late_recipient_urls"].items()
        }

        def late_send(holding: Any, dec: Any, mode: str) -> None:
            """The effect token issued before the holder stopped, sent now to each recipient
            that never hears from a successor (one of them is told of new epochs)."""
            key, epoch = holding.work_key, holding.epoch
            headers = {
                "X-Lease-Epoch": str(epoch),
                "X-Work-Key": key,
                "X-Fencing-Token": dec.fencing_token,
            }
            accepted = False
            for role, http in late_http.items():
                attempt = uuid.uuid4().hex
                emit(
                    ev="late_attempt",
                    attempt=attempt,
                    agent=name,
                    key=key,
                    epoch=epoch,
                    mode=mode,
                    recipient=role,
                )
                body = {"attempt": attempt, "idem": dec.idempotency_key, "agent": name}
                try:
                    r = http.post("/effect", json={**body, "kind": mode}, headers=headers)
                except httpx.HTTPError as exc:
                    emit(ev="late_result", attempt=attempt, result="indeterminate", err=repr(exc))
                    continue
                data = r.json() if r.content else {}
                result = {201: "accepted", 403: "refused", 409: "refused"}.get(
                    r.status_code, "indeterminate"
                )
                accepted = accepted or result == "accepted"
                emit(ev="late_result", attempt=attempt, result=result, code=data.get("code"))
            try:
                client.report_outcome(dec.effect_id, "applied" if accepted else "failed")
            except LeaseError:
                pass

        def before_stopping(holding: Any) -> Any:
            """An effect authorized just before the holder stops: its token is in flight."""
            idem = f"{name}-pre-{uuid.uuid4().hex[:12]}"
            dec = holding.propose("chaos.pay", holding.work_key, idempotency_key=idem)
            return dec if dec.authorized and dec.fencing_token else None

        def stall(holding: Any) -> None:
            """Stop renewing into jeopardy, and wake before the in-flight effect's token
            expires (an operator may take the work over meanwhile); then send it anyway."""
            dec = before_stopping(holding)
            client.renewer.unregister(holding)
            pause = ttl_s * rng.uniform(0.75, 0.95)
            if dec is not None:
                # Jeopardy comes 0.3 ttl before the token dies (the lease's expiry at issue):
                # wake just before it does, so a takeover meanwhile finds the token alive.
                expires_s = unverified_claims(dec.fencing_token).expires_at_ms / 1000
                pause = max(0.0, expires_s - time.time() - ttl_s * rng.uniform(0.03, 0.1))
            emit(ev="stall", agent=name, key=holding.work_key, epoch=holding.epoch, s=pause)
            time.sleep(pause)
            if dec is not None:
                late_send(holding, dec, "stall")
            try:
                client.release(holding.lease_id, holding.epoch)
            except LeaseError:
                pass

        def send(headers: dict[str, str], key: str, epoch: int, idem: str, kind: str) -> str:
            attempt = uuid.uuid4().hex
            emit(ev="attempt", attempt=attempt, agent=name, key=key, epoch=epoch, kind=kind)
            body = {"attempt": attempt, "idem": idem, "agent": name, "kind": kind}
            try:
                r = rhttp.post("/effect", json=body, headers=headers)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                emit(ev="result", attempt=attempt, result="connect_failed")
                return "connect_failed"
            except httpx.HTTPError as exc:
                emit(ev="result", attempt=attempt, result="indeterminate", err=type(exc).__name__)
                return "indeterminate"
            data = r.json() if r.content else {}
            if r.status_code == 201:
                result = "accepted"
            elif r.status_code in (403, 409):
                result = "refused"
            else:
                result = "indeterminate"
            emit(
                ev="result",
                attempt=attempt,
                result=result,
                status=r.status_code,
                code=data.get("code"),
                ledger_id=data.get("ledger_id"),
            )
            return result

        def zombie(holding: Any) -> None:
            """Stop renewing, sleep past the ttl, then try an effect anyway."""
            pre = before_stopping(holding)
            client.renewer.unregister(holding)
            pause = ttl_s * rng.uniform(1.3, 1.8)
            emit(ev="pause", agent=name, key=holding.work_key, epoch=holding.epoch, s=pause)
            time.sleep(pause)
            idem = f"{name}-z-{uuid.uuid4().hex[:12]}"
            try:
                holding.propose("chaos.pay", holding.work_key, idempotency_key=idem)
                emit(ev="zombie_sdk", result="allowed", key=holding.work_key)
            except LocalJeopardy:
                emit(ev="zombie_sdk", result="refused", key=holding.work_key)
            except LeaseError as exc:
                emit(ev="zombie_sdk", result="refused", code=exc.code, key=holding.work_key)
            token = holding.fencing_token
            for _ in range(3):  # the server's answer, bypassing the SDK's local deadline
                try:
                    dec = client.propose_effect(
                        holding.lease_id,
                        holding.epoch,
                        "chaos.pay",
                        holding.work_key,
                        idempotency_key=idem,
                    )
                    emit(ev="zombie_server", result=dec.decision, key=holding.work_key)
                    token = dec.fencing_token or token
                    break
                except TransientError:
                    time.sleep(0.3)
                except LeaseError as exc:
                    emit(ev="zombie_server", result="refused", code=exc.code, key=holding.work_key)
                    break
            else:
                emit(ev="zombie_server", result="unreachable", key=holding.work_key)
            headers = {"X-Lease-Epoch": str(holding.epoch), "X-Work-Key": holding.work_key}
            if token:
                headers["X-Fencing-Token"] = token
            result = send(headers, holding.work_key, holding.epoch, idem, "zombie")
            emit(ev="zombie_recipient", result=result, key=holding.work_key)
            if pre is not None:
                late_send(holding, pre, "pause")
            try:
                client.release(holding.lease_id, holding.epoch)
            except LeaseError:
                pass

        n = 0
        while not stopping():
            key = rng.choice(cfg["keys"])
            try:
                holding = client.hold(key)
            except (WorkLeased, LockDelay):
                time.sleep(rng.uniform(0.05, 0.3))
                continue
            except LeaseError as exc:
                emit(ev="acquire_error", agent=name, code=exc.code)
                time.sleep(rng.uniform(0.2, 0.5))
                continue
            emit(
                ev="grant",
                agent=name,
                key=key,
                epoch=holding.epoch,
                lease=holding.lease_id,
                order=order(holding.fencing_token),
            )
            fault = rng.random()
            if n == 0 and name in cfg.get("first_faults", {}):
                fault = cfg["first_faults"][name]  # this agent's first grant: a sure fault
            try:
                n += 1
                holding.checkpoint({"agent": name, "n": n})
                effects = rng.randint(1, 3)
                for j in range(effects):
                    if fault < cfg["p_pause"] and j == effects - 1:
                        zombie(holding)
                        break
                    stalls = cfg["p_pause"] + cfg["p_abandon"] + cfg.get("p_stall", 0.0)
                    if cfg["p_pause"] + cfg["p_abandon"] <= fault < stalls and j == effects - 1:
                        stall(holding)
                        break
                    idem = f"{name}-{uuid.uuid4().hex[:16]}"
                    dec = holding.propose("chaos.pay", key, idempotency_key=idem)
                    if not dec.authorized:
                        continue
                    emit(ev="effect", effect=dec.effect_id, key=key, lease=holding.lease_id,
                         order=order(dec.fencing_token))  # fmt: skip
                    result = send(holding.headers(dec), key, holding.epoch, idem, "normal")
                    outcome = {"accepted": "applied", "refused": "failed"}.get(result, "unknown")
                    try:
                        holding.report_outcome(dec.effect_id, outcome)
                    except LeaseError:
                        pass
                    time.sleep(rng.uniform(0.05, 0.5))
                else:
                    if fault < cfg["p_pause"] + cfg["p_abandon"]:
                        client.renewer.unregister(holding)  # the thread walks away
                        emit(ev="abandon", agent=name, key=key, epoch=holding.epoch)
                        continue
                    holding.release()
                    emit(ev="release", agent=name, key=key, epoch=holding.epoch)
            except LeaseError as exc:
                emit(ev="lost", agent=name, key=key, epoch=holding.epoch, code=exc.code)
                client.renewer.unregister(holding)
                try:
                    holding.release()
                except LeaseError:
                    pass
            except Exception as exc:  # keep the agent alive; the log says what happened
                emit(ev="agent_error", agent=name, err=repr(exc)[:300])
                client.renewer.unregister(holding)
                time.sleep(0.2)
        client.close()
        rhttp.close()
        for http in late_http.values():
            http.close()

    threads = [threading.Thread(target=run, args=(a,), daemon=True) for a in cfg["agents"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(cfg["run_s"] + 30)
    return 0


class Fleet:
    """Agent processes as the orchestrator sees them. `common` is the part of every agent
    process's configuration that is the same for all (keys, recipient, ttl, seed, odds)."""

    def __init__(self, services: Services, common: dict[str, Any]) -> None:
        self.services = services
        self.common = common
        self.procs: list[dict[str, Any]] = []
        self.logs: list[Path] = []

    def start(self, idx: int, agents: list[dict[str, Any]], run_s: float) -> None:
        log = self.services.tmp / f"agents-{idx}-{len(self.logs)}.jsonl"
        self.logs.append(log)
        cfg = {**self.common, "agents": agents, "log": str(log), "run_s": run_s}
        path = log.with_suffix(".json")
        path.write_text(json.dumps(cfg))
        cmd = [PY, "-m", "bench.chaos", "_agent", str(path)]
        proc = self.services.spawn(f"agents-{idx}", cmd, self.services.env())
        self.procs.append({"idx": idx, "agents": agents, "proc": proc})

    def kill_one(self, rng: random.Random) -> dict[str, Any] | None:
        """SIGKILL one live agent process, chosen by `rng`; returns it (None: none live)."""
        live = [a for a in self.procs if a["proc"].poll() is None]
        if not live:
            return None
        victim = rng.choice(live)
        os.killpg(victim["proc"].pid, signal.SIGKILL)
        victim["proc"].wait(5)
        self.procs.remove(victim)
        return victim

    def wait(self, timeout: float) -> None:
        for a in self.procs:
            try:
                a["proc"].wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(a["proc"].pid, signal.SIGKILL)

    def records(self) -> list[dict[str, Any]]:
        records = []
        for path in self.logs:
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                try:
                    records.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by SIGKILL
        return records
