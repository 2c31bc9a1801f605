"""The request-body parsers of the API, and the check of what else a request hands to storage.

Every body is refused at the edge when a string in it (a value or an object key) cannot be stored
(kit/text.py: a lone UTF-16 surrogate, which JSON's `\\ud800` escape allows, or NUL, which PostgreSQL's
text columns refuse): a 400 in the API's error shape whose `issues` names the field's path
(`variables.name`, `turns.0.text`). Refused before any view runs, so nothing is stored, queued or sent
to a carrier for such a request, and no row is written that would make every later read of the list
fail. `JsonParser` is REST_FRAMEWORK's default parser (voiceagent/settings.py); `MultiPartParser`
checks the form fields and file names of an upload the same way; `refuse_unstorable` is for the
values a view decodes by hand (a JSON text in a form field, the cells of an uploaded CSV), and
`refuse_unstorable_request` for the query string and the URL's parameters (PublicApiView)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from kit.errors import ApiError
from kit.text import unstorable_field


def refuse_unstorable(value: Any, path: str = "") -> None:
    """ApiError 400 naming the field (its path under `path`) when a string in `value` cannot be stored."""
    found = unstorable_field(value, path)
    if found is not None:
        field, reason = found
        raise ApiError.field(field or "body", reason)


def refuse_unstorable_request(query: Mapping[str, Any], url_parameters: Mapping[str, Any]) -> None:
    """A 400 naming the query parameter or URL parameter that cannot be stored or searched for (NUL,
    which a `%00` gives, is refused by PostgreSQL in any query: it would be a 500)."""
    refuse_unstorable(_flat(query))
    refuse_unstorable({key: value for key, value in url_parameters.items() if isinstance(value, str)})


class JsonParser(parsers.JSONParser):
    """DRF's JSON parser, with a too deeply nested document a 400 like any other malformed body (the
    standard library raises RecursionError for it, which DRF does not catch), and a string that cannot
    be stored a 400 naming its field."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        refuse_unstorable(data)
        return data


class MultiPartParser(parsers.MultiPartParser):
    """DRF's multipart parser; a form field (name or value) or a file name that cannot be stored is a
    400 naming it. A file's content is the view's to check (a CSV's cells: `refuse_unstorable`)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        refuse_unstorable(_flat(parsed.data))
        names = {key: [upload.name or "" for upload in uploads] for key, uploads in parsed.files.lists()}
        refuse_unstorable({key: items[0] if len(items) == 1 else items for key, items in names.items()})
        return parsed


def _flat(values: Mapping[str, Any]) -> dict[str, Any]:
    """A QueryDict as a JSON object: a key given once is its value, a key given more often its list."""
    if not hasattr(values, "lists"):
        return dict(values)
    return {key: items[0] if len(items) == 1 else items for key, items in values.lists()}
