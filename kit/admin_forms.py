"""What the dashboard's forms share so that they refuse exactly what the API refuses.

- `PhoneNumberFormField`: an E.164 number, checked by the API's own rule (kit.validation).
- `StorableJSONField`: JSON typed in a text box, refused (naming the place) when a string in it cannot be
  stored, as a JSON request body is (kit/parsers.py).
- `check_with_service`: a form asks the service that will save it, in a savepoint that is always rolled
  back, and shows the service's ApiError on the field it names; the rule stays in the service.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django import forms
from django.db import transaction

from kit.errors import ApiError
from kit.text import unstorable_field
from kit.validation import e164_problem


class PhoneNumberFormField(forms.CharField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 16)
        kwargs.setdefault("help_text", "E.164: a plus sign, the country code and the number, e.g. +14155550123.")
        super().__init__(**kwargs)

    def validate(self, value: Any) -> None:
        super().validate(value)
        problem = e164_problem(value) if value not in self.empty_values else None
        if problem:
            raise forms.ValidationError(problem, code="invalid")


class StorableJSONField(forms.JSONField):
    def bound_data(self, data: Any, initial: Any) -> Any:
        # Refused text is shown again as it was typed (its escapes), never as the character itself, which
        # the page could not be encoded with.
        value = super().bound_data(data, initial)
        if not isinstance(value, forms.fields.InvalidJSONInput) and unstorable_field(value) is not None:
            return forms.fields.InvalidJSONInput(data)
        return value

    def validate(self, value: Any) -> None:
        super().validate(value)
        found = unstorable_field(value)
        if found is not None:
            where, reason = found
            raise forms.ValidationError(f"{where}: {reason}" if where else reason, code="invalid")


def add_api_error(
    form: forms.BaseForm, error: ApiError, fields: Mapping[str, str], fallback: str | None = None
) -> None:
    """Put a service's error on the form: each issue on the form field its API name maps to (`fields`),
    anything else on `fallback` (None: above the form)."""
    placed = False
    for name, messages in (error.issues or {}).items():
        field = fields.get(name)
        if field in form.fields:
            for message in messages:
                form.add_error(field, message)
            placed = True
    if not placed:
        form.add_error(fallback if fallback in form.fields else None, error.message)


class _RolledBack(Exception):
    pass


def check_with_service(
    form: forms.BaseForm, run: Callable[[], object], fields: Mapping[str, str], fallback: str | None = None
) -> None:
    """Run the service call that will save the form (`run`) and undo it: the form shows the ApiError the
    service raises (see add_api_error). Row locks the service takes last until the admin's transaction ends."""
    try:
        with transaction.atomic():
            run()
            raise _RolledBack
    except _RolledBack:
        pass
    except ApiError as error:
        add_api_error(form, error, fields, fallback)
