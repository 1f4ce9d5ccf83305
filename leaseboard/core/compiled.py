"""Hot-path reads compiled once per process.

Building and compiling a queryset (filters, joins, `select_related`, annotations) costs more
CPU than the PostgreSQL round trip it produces: in a profile of effect authorization the
ORM's compiler took ~30% of a request. A `CompiledRead` builds its queryset once per
database vendor with sentinel parameters, keeps the SQL, the parameters and the
compiler's value converters (JSON, UUIDs on SQLite, ...), and answers each call with one
`cursor.execute` and model instances made through `Model.from_db`, the way Django makes
them. The SQL stays the ORM's, so it is right for both vendors (SQLite simply has no row
locks, and Django leaves `FOR UPDATE` out there).

The queryset must be a `values_list` whose names are a model's own attribute names and,
for each related model wanted as an instance, `<relation>__<attname>`; anything else in
the list (annotations) comes back as extra values.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection as default_connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model, QuerySet

from leaseboard.core.sql import prepared_cursor


@dataclass(frozen=True)
class _Statement:
    sql: str
    params: tuple[Any, ...]
    slots: tuple[int, ...]  # where each call's values go among the parameters
    converters: dict[int, tuple[list[Any], Any]]


class CompiledRead:
    """A read compiled once per vendor (and per test clock offset, which the SQL bakes in).

    `build(*sentinels)` returns the `values_list` queryset; each sentinel must appear once
    among the compiled parameters, prepared the way its field prepares it (pass `prep` to
    prepare call values the same way). `model` is what `row` makes of it, with instances
    of the (relation, model) pairs of `related` attached. A setting the SQL bakes in
    besides the clock offset goes in `varies_with`, which is asked for it every call."""

    def __init__(
        self,
        build: Callable[..., QuerySet[Any, Any]],
        sentinels: Sequence[Any],
        model: type[Model],
        related: Sequence[tuple[str, type[Model]]] = (),
        varies_with: Callable[[], Hashable] = lambda: None,
    ) -> None:
        self._build = build
        self._sentinels = tuple(sentinels)
        self._model = model
        self._related = tuple(related)
        self._varies_with = varies_with
        self._statements: dict[tuple[str, int, Hashable], _Statement] = {}
        self._names: list[str] = []
        self._lock = threading.Lock()

    def _statement(self, connection: BaseDatabaseWrapper) -> _Statement:
        key = (
            connection.vendor,
            int(settings.LEASEBOARD_DB_CLOCK_OFFSET_MS),
            self._varies_with(),
        )
        found = self._statements.get(key)
        if found is not None:
            return found
        with self._lock:
            queryset = self._build(*self._sentinels)
            compiler = queryset.query.get_compiler(connection=connection)
            sql, params = compiler.as_sql()
            slots = []
            for sentinel in self._sentinels:
                hits = [i for i, p in enumerate(params) if p == _prepared(sentinel, connection)]
                if len(hits) != 1:
                    raise AssertionError(f"sentinel {sentinel!r} appears {len(hits)} times")
                slots.append(hits[0])
            converters = compiler.get_converters([col for col, _, _ in compiler.select])
            self._names = list(queryset._fields)  # type: ignore[attr-defined]
            found = _Statement(sql, tuple(params), tuple(slots), converters)
            self._statements[key] = found
            return found

    def values(self, *values: Any, using: BaseDatabaseWrapper | None = None) -> list[Any] | None:
        """Run the read with these values in place of the sentinels: the first row's values,
        converted as the ORM would, or None. `using`: another connection than the default."""
        connection = using or default_connection
        statement = self._statement(connection)
        params = list(statement.params)
        for slot, value in zip(statement.slots, values, strict=True):
            params[slot] = _prepared(value, connection)
        with prepared_cursor(connection) as cursor:
            cursor.execute(statement.sql, params)
            raw = cursor.fetchone()
        if raw is None:
            return None
        row = list(raw)
        for position, (functions, expression) in statement.converters.items():
            value = row[position]
            for function in functions:
                value = function(value, expression, connection)
            row[position] = value
        return row

    def row(
        self, *values: Any, using: BaseDatabaseWrapper | None = None
    ) -> tuple[Model, list[Any]] | None:
        """The primary model's instance (the related instances attached to it) and the
        extra values of the first row, or None."""
        row = self.values(*values, using=using)
        return None if row is None else self._instances(row, (using or default_connection).alias)

    def _instances(self, row: list[Any], alias: str) -> tuple[Model, list[Any]]:
        own = {field.attname for field in self._model._meta.concrete_fields}
        parts: dict[str, tuple[set[str], list[str], list[Any]]] = {
            relation: ({f.attname for f in model._meta.concrete_fields}, [], [])
            for relation, model in self._related
        }
        names: list[str] = []
        values: list[Any] = []
        extra: list[Any] = []
        for name, value in zip(self._names, row, strict=True):
            prefix, _, attname = name.rpartition("__")
            if not prefix and name in own:
                names.append(name)
                values.append(value)
            elif prefix in parts and attname in parts[prefix][0]:
                parts[prefix][1].append(attname)
                parts[prefix][2].append(value)
            else:
                extra.append(value)
        primary = self._model.from_db(alias, names, values)
        for relation, model in self._related:
            _, related_names, related_values = parts[relation]
            setattr(primary, relation, model.from_db(alias, related_names, related_values))
        return primary, extra


_INSERTS: dict[tuple[str, type[Model]], tuple[str, list[Any]]] = {}


def model_insert(obj: Model, using: BaseDatabaseWrapper | None = None) -> None:
    """Insert a new model instance whose primary key is set already (a UUID default): one
    INSERT whose text is built once per model and vendor, each column's value prepared by
    its field as `save()` prepares it, without the compiler `save()` runs every time.
    Signals are not sent (none is connected to the models this is used for)."""
    connection = using or default_connection
    model = type(obj)
    key = (connection.vendor, model)
    if key not in _INSERTS:
        fields = list(model._meta.concrete_fields)
        if any(
            field.primary_key and field.get_internal_type().endswith("AutoField")
            for field in fields
        ):
            raise TypeError(f"{model.__name__} has a database-made key: use save()")
        columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
        table = connection.ops.quote_name(model._meta.db_table)
        placeholders = ", ".join(["%s"] * len(fields))
        _INSERTS[key] = (f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", fields)
    sql, fields = _INSERTS[key]
    params = [field.get_db_prep_save(field.pre_save(obj, True), connection) for field in fields]
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, params)
    obj._state.adding = False
    obj._state.db = connection.alias


def _prepared(value: Any, connection: BaseDatabaseWrapper) -> Any:
    """A lookup value as the ORM passes it: UUIDs as hex where the database has no UUID
    type (SQLite)."""
    if isinstance(value, uuid.UUID) and not connection.features.has_native_uuid_field:
        return value.hex
    return value


def attnames(model: type[Model], prefix: str = "") -> list[str]:
    """The `values_list` names of a model's concrete columns, under a relation prefix."""
    return [f"{prefix}{field.attname}" for field in model._meta.concrete_fields]
