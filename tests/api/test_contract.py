"""The API contract as its users meet it: clients generated from /api/v1/openapi.json.

- openapi-python-client generates a Python client; the README tour (admit, acquire with the
  default call, renew, batch renew, checkpoint, effect, outcome, release, and a stale epoch
  read through the typed Problem) runs with it against a live server.
- openapi-typescript generates types; the same tour in TypeScript (contract/tour.ts) must
  type-check with tsc 5 and then run against the live server under Node.
- The README's API table lists exactly the schema's operations, with their statuses.
- The response checker the API tests rely on (schema_check) refuses a response whose status
  or field the schema does not declare.

With CI=true a missing generator fails these tests; elsewhere they are skipped with the
reason (`python3 dev.py test` installs both).
"""

from __future__ import annotations

import copy
import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.schema_check import Contract, served_contract
from tests.pg_env import IN_CI

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = Path(__file__).resolve().parent / "contract"
NODE_BIN = CONTRACT / "node_modules" / ".bin"
PACKAGE = "leaseboard_api_client"


def need(ok: bool, what: str) -> None:
    if ok:
        return
    if IN_CI:
        pytest.fail(f"{what} is missing under CI=true; `python3 dev.py test` installs it")
    pytest.skip(f"{what} is not installed (python3 dev.py test installs it)")


def served_schema(base_url: str) -> dict[str, Any]:
    response = httpx.get(f"{base_url}/api/v1/openapi.json", timeout=30)
    response.raise_for_status()
    return response.json()


# -- the generated Python client ------------------------------------------------------------


def generate_python_client(doc: dict[str, Any], where: Path) -> Any:
    generator = Path(sys.executable).parent / "openapi-python-client"
    need(generator.exists(), "openapi-python-client")
    spec = where / "openapi.json"
    spec.write_text(json.dumps(doc))
    env = {"PATH": f"{generator.parent}:/usr/bin:/bin"}  # its ruff post-hook: the venv's
    done = subprocess.run(
        [str(generator), "generate", "--path", str(spec), "--meta", "none"]
        + ["--output-path", str(where / PACKAGE)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=where,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    sys.path.insert(0, str(where))
    try:
        return importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(where))


@pytest.mark.postgres
def test_the_generated_python_client_runs_the_readme_tour(live_server, agent, tmp_path):
    generate_python_client(served_schema(live_server.url), tmp_path)
    from leaseboard_api_client import AuthenticatedClient  # type: ignore[import-not-found]
    from leaseboard_api_client.api.effects import (  # type: ignore[import-not-found]
        propose_effect,
        report_outcome,
    )
    from leaseboard_api_client.api.leases import (  # type: ignore[import-not-found]
        acquire_lease,
        release_lease,
        renew_lease,
        renew_leases,
        save_checkpoint,
    )
    from leaseboard_api_client.api.work_items import (  # type: ignore[import-not-found]
        admit_work_item,
        get_work_item,
    )
    from leaseboard_api_client.models import (  # type: ignore[import-not-found]
        Admission,
        BatchItem,
        BatchRenewIn,
        Certainty,
        CheckpointIn,
        EffectIn,
        EpochIn,
        ErrorCode,
        LeaseGranted,
        Outcome,
        OutcomeIn,
        Problem,
        RefusingDecision,
        WorkItemIn,
    )

    _, holder_token = agent("py-tour")
    _, successor_token = agent("py-successor")
    holder = AuthenticatedClient(base_url=live_server.url, token=holder_token)
    successor = AuthenticatedClient(base_url=live_server.url, token=successor_token)

    admitted = admit_work_item.sync(client=holder, body=WorkItemIn(key="refund-1042"))
    assert admitted.admission == Admission.ADMITTED and admitted.epoch == 0

    # The default call: no body at all (a generated client once sent `Unset`).
    grant = acquire_lease.sync(client=holder, key="refund-1042")
    assert isinstance(grant, LeaseGranted), grant
    assert grant.epoch == 1 and grant.ttl_ms == 15_000 and grant.checkpoint is None

    renewed = renew_lease.sync(client=holder, lease_id=grant.lease_id, body=EpochIn(epoch=1))
    assert renewed.certainty == Certainty.ACTIVE and renewed.lease_id == grant.lease_id
    batch = renew_leases.sync(
        client=holder,
        body=BatchRenewIn(leases=[BatchItem(lease_id=str(grant.lease_id), epoch=1)]),
    )
    assert [r.ok for r in batch.results] == [True] and batch.results[0].code is None

    saved = save_checkpoint.sync(
        client=holder, lease_id=grant.lease_id, body=CheckpointIn(epoch=1, data={"step": 2})
    )
    assert saved.seq == 1
    effect = {"lease_id": str(grant.lease_id), "epoch": 1, "kind": "payment.refund"}
    authorized = propose_effect.sync(
        client=holder,
        body=EffectIn(**effect, target="order-1042", idempotency_key="refund-1042-a"),
    )
    assert authorized.decision == "authorized" and authorized.fencing_token
    outcome = report_outcome.sync(
        client=holder, effect_id=authorized.effect_id, body=OutcomeIn(outcome=Outcome.APPLIED)
    )
    assert outcome.outcome == Outcome.APPLIED

    released = release_lease.sync(client=holder, lease_id=grant.lease_id, body=EpochIn(epoch=1))
    assert released.state == Certainty.RELEASED
    successor_grant = acquire_lease.sync(client=successor, key="refund-1042")
    assert successor_grant.epoch == 2 and successor_grant.checkpoint.data == {"step": 2}

    late = propose_effect.sync_detailed(
        client=holder,
        body=EffectIn(**effect, target="order-1042", idempotency_key="refund-1042-b"),
    )
    assert late.status_code == 409 and isinstance(late.parsed, Problem)
    problem = late.parsed
    assert problem.code == ErrorCode.STALE_EPOCH and problem.decision == RefusingDecision.LEASE
    assert (problem.current_epoch, problem.your_epoch) == (2, 1)
    assert late.headers["content-type"].startswith("application/problem+json")

    state = get_work_item.sync(client=successor, key="refund-1042")
    assert state.epoch == 2 and state.certainty == Certainty.ACTIVE


# -- the TypeScript tour ------------------------------------------------------------------------


def node_tools() -> dict[str, str]:
    tools = {
        "node": shutil.which("node") or "",
        "tsc": str(NODE_BIN / "tsc"),
        "openapi-typescript": str(NODE_BIN / "openapi-typescript"),
    }
    for name, path in tools.items():
        need(bool(path) and Path(path).exists(), name)
    return tools


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.postgres
def test_the_typescript_tour_type_checks_and_runs(live_server, agent, tmp_path):
    tools = node_tools()
    version = run(tools["tsc"], "--version", cwd=tmp_path)
    assert version.stdout.startswith("Version 5."), version.stdout
    (tmp_path / "openapi.json").write_text(json.dumps(served_schema(live_server.url)))
    done = run(tools["openapi-typescript"], "openapi.json", "-o", "openapi.d.ts", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.copy(CONTRACT / "tour.ts", tmp_path / "tour.ts")
    typed = run(
        tools["tsc"],
        "--strict",
        "--noUnusedLocals",
        "--target",
        "es2022",
        "--module",
        "commonjs",
        "--lib",
        "es2022,dom",
        "--outDir",
        "out",
        "tour.ts",
        cwd=tmp_path,
    )
    assert typed.returncode == 0, typed.stdout + typed.stderr
    _, holder = agent("ts-tour")
    _, successor = agent("ts-successor")
    ran = run(
        tools["node"], "out/tour.js", live_server.url, holder, successor, "ts-1", cwd=tmp_path
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout) == {"epochs": [1, 2], "outcome": "applied", "state": "released"}


# -- the README's table ---------------------------------------------------------------------------


EVERY_OPERATION = {413, 429, 500, 503}  # the README says so once, above its table


def readme_api_table() -> dict[tuple[str, str], set[int]]:
    """{(method, path with {} for parameters): statuses} from README's "API (v1)" table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## API (v1)", 1)[1].split("\n## ", 1)[0]
    assert "every operation may also answer **413**" in section
    assert all(f"**{status}**" in section for status in EVERY_OPERATION)
    rows: dict[tuple[str, str], set[int]] = {}
    for line in section.splitlines():
        found = re.match(r"\|\s*`(GET|POST|PUT|PATCH|DELETE) (/api/v1/[^`]*)`\s*\|(.*)\|", line)
        if found:
            method, path, rest = found.groups()
            statuses = rest.rsplit("|", 1)[-1]
            rows[method, re.sub(r"\{[^}]*\}", "{}", path)] = EVERY_OPERATION | {
                int(s) for s in re.findall(r"\b[1-5]\d\d\b", statuses)
            }
    return rows


def schema_operations(doc: dict[str, Any]) -> dict[tuple[str, str], set[int]]:
    return {
        (method.upper(), re.sub(r"\{[^}]*\}", "{}", path)): {int(s) for s in op["responses"]}
        for path, item in doc["paths"].items()
        for method, op in item.items()
    }


def test_the_readme_api_table_and_the_schema_agree():
    table, schema = readme_api_table(), schema_operations(served_contract().doc)
    assert len(table) >= 13
    assert sorted(table) == sorted(schema), "README rows and schema operations differ"
    for operation, statuses in schema.items():
        assert table[operation] == statuses, f"{operation}: README {table[operation]}"


# -- the checker itself ---------------------------------------------------------------------------


STALE = {
    "type": "urn:leaseboard:problem:stale_epoch",
    "title": "The epoch is older than the work item's current epoch",
    "status": 409,
    "detail": "the epoch presented is not the current one",
    "code": "stale_epoch",
    "decision": "lease",
    "current_epoch": 2,
    "your_epoch": 1,
}
PROBLEM_HEADERS = {"Content-Type": "application/problem+json"}
RENEW = "/api/v1/leases/00000000-0000-0000-0000-000000000001/renew"


def test_the_checker_passes_a_declared_refusal():
    served_contract().check("POST", RENEW, 409, PROBLEM_HEADERS, json.dumps(STALE).encode())


def test_the_checker_fails_when_a_status_is_removed_from_the_schema():
    doc = copy.deepcopy(served_contract().doc)
    del doc["paths"]["/api/v1/leases/{lease_id}/renew"]["post"]["responses"]["409"]
    with pytest.raises(AssertionError, match="status not declared"):
        Contract(doc).check("POST", RENEW, 409, PROBLEM_HEADERS, json.dumps(STALE).encode())


def test_the_checker_fails_when_a_field_is_removed_from_the_schema():
    doc = copy.deepcopy(served_contract().doc)
    del doc["components"]["schemas"]["Problem"]["properties"]["your_epoch"]
    with pytest.raises(AssertionError, match="your_epoch"):
        Contract(doc).check("POST", RENEW, 409, PROBLEM_HEADERS, json.dumps(STALE).encode())


@pytest.mark.parametrize(
    ("status", "headers", "body", "complaint"),
    [
        (409, {"Content-Type": "application/json"}, STALE, "Content-Type"),
        (409, PROBLEM_HEADERS, {**STALE, "code": "stale"}, "does not match"),
        (429, PROBLEM_HEADERS, {**STALE, "status": 429, "code": "rate_limited"}, "Retry-After"),
        (418, PROBLEM_HEADERS, STALE, "status not declared"),
    ],
)
def test_the_checker_fails_an_undeclared_answer(status, headers, body, complaint):
    with pytest.raises(AssertionError, match=complaint):
        served_contract().check("POST", RENEW, status, headers, json.dumps(body).encode())


# -- what the document itself says ----------------------------------------------------------------


def test_the_schema_declares_problems_tags_ids_enums_and_the_key_alphabet():
    from leaseboard.core.services.work import KEY_PATTERN
    from leaseboard.domain.certainty import Certainty
    from leaseboard.domain.errors import ALL_CODES
    from leaseboard.domain.reconciliation import Outcome, Resolution
    from leaseboard.domain.vocabulary import Admission, ExecutorKind, WorkStatus

    doc = served_contract().doc
    schemas = doc["components"]["schemas"]
    ids = set()
    for path, item in doc["paths"].items():
        for method, op in item.items():
            where = f"{method} {path}"
            ids.add(op["operationId"])
            assert re.fullmatch(r"[a-z]+(_[a-z]+)+", op["operationId"]), where
            assert op["tags"], where
            assert {"413", "429"} <= set(op["responses"]), where
            retry = op["responses"]["429"]["headers"]["Retry-After"]
            assert retry["required"] is True, where
            for status, response in op["responses"].items():
                if status.startswith("4"):
                    assert list(response["content"]) == ["application/problem+json"], where
            for param in op.get("parameters", []):
                if param["name"] == "key":
                    assert param["schema"]["pattern"] == KEY_PATTERN, where
    assert {"acquire_lease", "renew_lease", "renew_leases", "release_lease"} <= ids
    assert {"admit_work_item", "save_checkpoint", "propose_effect", "report_outcome"} <= ids

    def enum(name: str) -> list[str]:
        return schemas[name]["enum"]

    assert sorted(enum("ErrorCode")) == sorted(ALL_CODES)
    assert schemas["Problem"]["properties"]["code"] == {"$ref": "#/components/schemas/ErrorCode"}
    assert schemas["Problem"]["additionalProperties"] is False
    assert set(schemas["Problem"]["required"]) == {"type", "title", "status", "detail", "code"}
    for domain, name in [
        (Admission, "Admission"),
        (WorkStatus, "WorkStatus"),
        (Certainty, "Certainty"),
        (ExecutorKind, "ExecutorKind"),
        (Outcome, "Outcome"),
        (Resolution, "Resolution"),
    ]:
        assert enum(name) == [m.value for m in domain], name
    out = schemas["WorkItemOut"]["properties"]
    assert out["admission"] == {"$ref": "#/components/schemas/Admission"}
    assert {"$ref": "#/components/schemas/Certainty"} in out["certainty"]["anyOf"]
    assert schemas["Jwks"]["properties"]["keys"]["items"] == {"$ref": "#/components/schemas/Jwk"}
    keys = doc["paths"]["/api/v1/fencing/keys"]["get"]["responses"]["200"]
    assert keys["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Jwks"}

    acquire = doc["paths"]["/api/v1/work-items/{key}/lease"]["post"]["requestBody"]
    assert acquire["required"] is False
    assert acquire["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AcquireIn"
    }
    admit = schemas["WorkItemIn"]
    assert admit["required"] == ["key"]
    assert not [name for name, p in admit["properties"].items() if "default" in p]
