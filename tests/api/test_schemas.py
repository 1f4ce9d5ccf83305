"""The v1 API's schemas (leaseboard/api/schemas/), one module per subject: the package
offers every schema by name (api/v1.py reads them as `s.Name`), each schema is defined in
one module only, response bodies declare every field and nothing else, and the bounds of
each subject keep bad input out. The served document itself: tests/api/test_contract.py."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from ninja import Schema
from pydantic import BaseModel, TypeAdapter, ValidationError

from leaseboard.api import schemas
from leaseboard.api.schemas import base, effects, fencing, leases, problems, work
from leaseboard.domain.errors import ALL_CODES
from leaseboard.domain.reconciliation import Resolution

SUBJECTS = (base, problems, work, leases, effects, fencing)
PACKAGE = Path(schemas.__file__).parent


def _defined_in(module: object) -> list[str]:
    return [
        name
        for name, value in vars(module).items()
        if inspect.isclass(value) and value.__module__ == module.__name__  # type: ignore[attr-defined]
    ]


def test_every_module_of_the_package_is_a_subject_here() -> None:
    on_disk = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert on_disk == {m.__name__.rsplit(".", 1)[1] for m in SUBJECTS}


def test_the_package_offers_every_schema_by_its_name() -> None:
    for module in SUBJECTS:
        for name in _defined_in(module):
            assert getattr(schemas, name) is getattr(module, name), name
            assert name in schemas.__all__
    assert sorted(schemas.__all__) == sorted(set(schemas.__all__))


@pytest.mark.parametrize("handlers", ["v1.py", "recipients.py"])
def test_the_api_handlers_find_each_schema_they_name_in_the_package(handlers: str) -> None:
    source = (PACKAGE.parent / handlers).read_text()
    used = {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "s"
    }
    assert used and not [name for name in used if not hasattr(schemas, name)]


def test_each_schema_is_defined_in_one_module() -> None:
    # deliberate: the one-module check of settings/test_package.py, over schemas instead.
    seen: dict[str, str] = {}
    for module in SUBJECTS:
        for name in _defined_in(module):
            assert name not in seen, f"{name} in {seen.get(name)} and {module.__name__}"
            seen[name] = module.__name__


def test_every_response_body_sends_every_field_and_no_other() -> None:
    outs = [
        value
        for module in SUBJECTS
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, BaseModel)
        and value.__name__.endswith(("Out", "Created", "Granted"))
    ]
    assert schemas.LeaseGranted in outs and schemas.BatchRenewOut in outs
    for model in outs:
        doc = model.model_json_schema(mode="serialization")
        assert doc.get("additionalProperties") is False, model.__name__
        assert set(doc.get("required", [])) == set(doc["properties"]), model.__name__


# -- base: the scalar types every subject's bounds are made of ---------------------------


@pytest.mark.parametrize("value", [True, "1", 1.0, -1, 2**62 + 1])
def test_an_epoch_is_a_strict_integer_in_bounds(value: object) -> None:
    with pytest.raises(ValidationError):
        TypeAdapter(base.Epoch).validate_python(value)
    assert TypeAdapter(base.Epoch).validate_python(7) == 7


@pytest.mark.parametrize("value", ["a\x00b", "lone \ud800"])
def test_text_postgresql_cannot_store_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="NUL characters or lone surrogates"):
        TypeAdapter(base.Text).validate_python(value)


def test_a_work_key_is_one_path_segment() -> None:
    keys = TypeAdapter(base.WorkKey)
    assert keys.validate_python("refund-1:a@b.c") == "refund-1:a@b.c"
    for bad in ("a/b", "", "-leading", "x" * 201):
        with pytest.raises(ValidationError):
            keys.validate_python(bad)


def test_a_checkpoint_document_is_any_json_but_null() -> None:
    docs = TypeAdapter(base.JsonDocument)
    assert docs.validate_python([1, {"a": None}]) == [1, {"a": None}]
    with pytest.raises(ValidationError, match="not null"):
        docs.validate_python(None)


# -- each subject's own bounds ------------------------------------------------------------


def test_a_problem_names_one_of_the_stable_codes() -> None:
    assert {code.value for code in problems.ErrorCode} == set(ALL_CODES)
    problem = problems.Problem(type="t", title="t", status=409, detail="d", code="stale_epoch")
    assert problem.code == "stale_epoch"
    with pytest.raises(ValidationError):
        problems.Problem(type="t", title="t", status=409, detail="d", code="no_such_code")


def test_a_work_item_may_tighten_its_timing_but_not_send_a_bad_key() -> None:
    item = work.WorkItemIn(key="job-1", policy={"ttl_ms": 5000})
    assert item.queue == "default" and item.policy is not None and item.policy.ttl_ms == 5000
    with pytest.raises(ValidationError):
        work.WorkItemIn(key="a/b")
    with pytest.raises(ValidationError):
        work.WorkItemIn(key="job-2", policy={"ttl_ms": "5000"})


def test_a_batch_renew_is_plain_pydantic_and_at_most_a_thousand() -> None:
    # Plain models, not ninja Schemas, on the batch's fast path (docs/benchmarks.md).
    assert not issubclass(leases.BatchItem, Schema) and not issubclass(leases.BatchRenewIn, Schema)
    entry = {"lease_id": "anything: answered not_found in its own result", "epoch": 1}
    assert len(leases.BatchRenewIn(leases=[entry] * 1000).leases) == 1000
    with pytest.raises(ValidationError):
        leases.BatchRenewIn(leases=[entry] * 1001)
    with pytest.raises(ValidationError):
        leases.BatchRenewIn(leases=[{"lease_id": "x", "epoch": "1"}])


def test_a_reconciliation_names_a_resolution_and_a_note() -> None:
    ok = effects.ReconcileIn(resolution="confirmed", note="seen at the bank", lease_id="x", epoch=2)
    assert ok.resolution == Resolution("confirmed")
    with pytest.raises(ValidationError):
        effects.ReconcileIn(resolution="confirmed", note="", lease_id="x", epoch=2)
    with pytest.raises(ValidationError):
        effects.ReconcileIn(resolution="maybe", note="n", lease_id="x", epoch=2)


def test_a_fencing_check_bounds_its_token_and_its_digest() -> None:
    assert fencing.FencingCheckIn(fencing_token="t", digest="sha256:" + "0" * 64).digest
    with pytest.raises(ValidationError):
        fencing.FencingCheckIn(fencing_token="t" * 4097)
    with pytest.raises(ValidationError):
        fencing.FencingCheckIn(fencing_token="t", digest="md5:abc")
