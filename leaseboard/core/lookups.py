"""`AnyOf(F("column"), values)`: the rows whose column holds one of `values`, sent as one
array parameter on PostgreSQL (`column = ANY(%s::bigint[])`) instead of an IN list of one
parameter per value, which the driver binds and the server parses value by value (a work-key
search filters on up to 2,000 work item ids, twice per statement). Elsewhere (SQLite) an IN
list, as `__in` writes it. Usable wherever a filter takes an expression:
`queryset.filter(AnyOf(F("work_item_id"), ids))`."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db.models import Lookup


class AnyOf(Lookup):  # type: ignore[type-arg]
    lookup_name = "any_of"
    prepare_rhs = False  # a list, not one value of the column's type

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        values = [self.lhs.output_field.get_db_prep_value(v, connection) for v in self.rhs]
        if not values:
            raise EmptyResultSet  # as `__in=[]`: the filter matches nothing
        if connection.vendor == "postgresql":
            db_type = self.lhs.output_field.db_type(connection)
            return f"{lhs} = ANY(%s::{db_type}[])", [*lhs_params, values]
        return f"{lhs} IN ({', '.join(['%s'] * len(values))})", [*lhs_params, *values]
