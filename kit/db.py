"""Database expressions shared by list selectors."""

from __future__ import annotations

from typing import Any

from django.db.models import CharField, Func


class IsoUtc(Func):
    """A timestamp rendered by the database as ISO 8601 UTC with microseconds, e.g.
    2026-11-22T19:03:11.123456Z: the same text as kit.fields.iso(), without building a Python
    datetime per row (lists of thousands of rows spend most of their time there otherwise)."""

    output_field = CharField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # Django stores UTC as 'YYYY-MM-DD HH:MM:SS[.ffffff]'; the fraction is absent when it is zero.
        template = (
            "(CASE WHEN length(%(expressions)s) = 19 THEN replace(%(expressions)s, ' ', 'T') || '.000000Z' "
            "ELSE replace(%(expressions)s, ' ', 'T') || 'Z' END)"
        )
        return self.as_sql(compiler, connection, template=template, **extra)
