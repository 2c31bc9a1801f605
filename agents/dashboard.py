"""The dashboard's forms write through the services, exactly as the public API does: a form parses its
values with the API's request serializer, calls the service, and shows a refusal on the form (on the
field it names, else at the top). Services run in a transaction, so a refused form saves nothing.

Used by the agent, tool and knowledge pages (agents/admin.py, agents/tools/admin.py, knowledge/admin.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from django import forms
from django.contrib import messages as flash
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest
from rest_framework import serializers
from rest_framework.exceptions import ValidationError as DrfValidationError

from kit import egress
from kit.errors import ApiError, validation_error

T = TypeVar("T")


def warn_destination(request: HttpRequest, url: str | None) -> None:
    """On a page showing a saved destination: warn when its host does not resolve right now (saving
    allowed it, since names can start resolving later; every request to it is refused until then)."""
    if request.method == "GET" and (warning := egress.destination_warning(url)):
        flash.warning(request, warning)


def wire_sources(serializer_class: type[serializers.Serializer]) -> dict[str, str]:
    """The serializer's wire names and the model fields they fill ({"serverUrl": "server_url", ...})."""
    return {name: cast(str, field.source) for name, field in serializer_class().fields.items()}  # bound: a str


def through_service(
    form: forms.BaseForm,
    call: Callable[[], T],
    *,
    fields: Mapping[str, str],
    codes: Mapping[str, str] | None = None,
) -> T | None:
    """Run `call` (parse with the API's serializer, then the service). Its answer, or None after putting
    the refusal on `form`: `fields` maps the wire names of the issues to form fields, `codes` maps error
    codes without issues (FEATURE_NOT_AVAILABLE, ...) to the form field they concern."""
    try:
        return call()
    except DrfValidationError as exc:
        error = validation_error(exc.detail)
    except ApiError as exc:
        error = exc
    except DjangoValidationError as exc:
        issues = exc.message_dict if hasattr(exc, "error_dict") else {"": exc.messages}
        error = ApiError.invalid("; ".join(m for messages in issues.values() for m in messages), issues)
    show_error(form, error, fields=fields, codes=codes or {})
    return None


def show_error(form: forms.BaseForm, error: ApiError, *, fields: Mapping[str, str], codes: Mapping[str, str]) -> None:
    """Each issue on its field (or on top of the form, prefixed with where it is); else the message."""
    issues = {key: messages for key, messages in (error.issues or {}).items() if messages}
    if not issues:
        target = codes.get(error.code or "")
        form.add_error(target if target in form.fields else None, error.message)
        return
    for key, messages in issues.items():
        target = fields.get(key, fields.get(key.split(".", 1)[0], key))
        if target in form.fields:
            form.add_error(target, list(messages))
        else:
            where = f"{key}: " if key and key not in ("body", "") else ""
            form.add_error(None, [f"{where}{message}" for message in messages])


class ServiceModelForm(forms.ModelForm):
    """A model form whose validation is the service call: `save_through_service()` parses the values with
    the API's serializer and calls the service. A valid form is a saved object (the admin's save_model
    has nothing left to do); an invalid one changed nothing. The model's own validation is not run: the
    service is the one place for the rules."""

    issue_fields: Mapping[str, str] = {}  # wire name of an issue -> form field
    issue_codes: Mapping[str, str] = {}  # error code without issues -> form field

    def save_through_service(self) -> Any:
        raise NotImplementedError

    def _post_clean(self) -> None:
        if self.errors:
            return
        saved = through_service(self, self.save_through_service, fields=self.issue_fields, codes=self.issue_codes)
        if saved is not None:
            self.instance = saved


def header_lines(headers: Mapping[str, Any]) -> str:
    """Header names for a page, values hidden ("Authorization: (hidden)")."""
    names = sorted(str(name) for name in headers or {})
    return ", ".join(f"{name}: (hidden)" for name in names) if names else "none"
