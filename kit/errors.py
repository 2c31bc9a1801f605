"""One error type and one JSON error shape for the whole public API.

Shape: ``{"error": "<human message>", "code": "<CODE>"?, "issues": {field: [messages]}?, ...extra}``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation, TooManyFieldsSent
from django.db import OperationalError
from django.http import Http404, JsonResponse, UnreadablePostError
from rest_framework import exceptions as drf_exceptions
from rest_framework import status
from rest_framework.response import Response

logger = logging.getLogger(__name__)

DATABASE_UNAVAILABLE = "DATABASE_UNAVAILABLE"
DATABASE_RETRY_AFTER_SECONDS = 5


class ApiError(Exception):
    """A failure the caller can act on. Services raise it; the exception handler renders it."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int = status.HTTP_400_BAD_REQUEST,
        code: str | None = None,
        issues: dict[str, list[str]] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.code = code
        self.issues = issues
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        data: dict[str, Any] = {"error": self.message}
        if self.code:
            data["code"] = self.code
        if self.issues:
            data["issues"] = self.issues
        data.update(self.extra)
        return data

    # Constructors for the common cases keep call sites short and the statuses consistent.
    @classmethod
    def invalid(cls, message: str, issues: dict[str, list[str]] | None = None) -> ApiError:
        return cls(message, status_code=400, issues=issues)

    @classmethod
    def field(cls, field: str, message: str) -> ApiError:
        return cls(f"Invalid {field}: {message}", status_code=400, issues={field: [message]})

    @classmethod
    def not_found(cls, message: str, code: str | None = None) -> ApiError:
        return cls(message, status_code=404, code=code)

    @classmethod
    def conflict(cls, message: str, code: str | None = None, **extra: Any) -> ApiError:
        return cls(message, status_code=409, code=code, extra=extra)

    @classmethod
    def forbidden(cls, message: str, code: str | None = None) -> ApiError:
        return cls(message, status_code=403, code=code)

    @classmethod
    def too_many(cls, message: str, *, code: str, retry_after: int, **extra: Any) -> ApiError:
        """A 429: the caller is over a limit; `retryAfter` (whole seconds) also goes out as Retry-After."""
        return cls(message, status_code=429, code=code, extra={"retryAfter": retry_after, **extra})


def response_headers(error: ApiError) -> dict[str, str]:
    headers = {}
    if error.status_code == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="api"'
    if "retryAfter" in error.extra:
        headers["Retry-After"] = str(error.extra["retryAfter"])
    if error.status_code == 416 and "size" in error.extra:
        headers["Content-Range"] = f"bytes */{error.extra['size']}"  # RFC 9110: the representation's length
    return headers


def _flatten_issues(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """Turn DRF's nested error detail into {"field.sub.0": ["message", ...]}."""
    issues: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = "body" if key == "non_field_errors" and not prefix else (f"{prefix}.{key}" if prefix else str(key))
            for k, v in _flatten_issues(value, name).items():
                issues.setdefault(k, []).extend(v)
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            issues[prefix or "body"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                if item:
                    for k, v in _flatten_issues(item, f"{prefix}.{index}" if prefix else str(index)).items():
                        issues.setdefault(k, []).extend(v)
    else:
        issues[prefix or "body"] = [str(detail)]
    return issues


def validation_error(detail: Any) -> ApiError:
    issues = _flatten_issues(detail)
    first_field, first_messages = next(iter(issues.items()), ("body", ["invalid"]))
    summary = f"Invalid request: {first_field}: {first_messages[0]}"
    if len(issues) > 1:
        summary += f" (and {len(issues) - 1} more)"
    return ApiError.invalid(summary, issues)


def _as_api_error(exc: Exception, context: dict[str, Any] | None = None) -> ApiError | None:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, drf_exceptions.ValidationError):
        return validation_error(exc.detail)
    if isinstance(exc, drf_exceptions.ParseError):
        return ApiError.invalid(f"Malformed request body: {exc.detail}")
    if isinstance(exc, drf_exceptions.UnsupportedMediaType):
        return _unsupported_media_type(exc, context)
    if isinstance(exc, (drf_exceptions.NotAuthenticated, drf_exceptions.AuthenticationFailed)):
        return ApiError(str(exc.detail), status_code=401)
    if isinstance(exc, (Http404, drf_exceptions.NotFound)):
        return ApiError.not_found("Not found")
    if isinstance(exc, drf_exceptions.APIException):
        return ApiError(str(exc.detail), status_code=exc.status_code)
    # What Django refuses by itself while reading the request: the caller's fault, never a 500.
    if isinstance(exc, RequestDataTooBig):
        return ApiError("The request body is too large.", status_code=413)
    if isinstance(exc, TooManyFieldsSent):
        return ApiError.invalid("Too many fields or query parameters in the request.")
    if isinstance(exc, SuspiciousOperation):
        return ApiError.invalid("The request was refused as malformed.")
    if isinstance(exc, UnreadablePostError):
        return ApiError.invalid("The request body could not be read.")
    if isinstance(exc, PermissionDenied):
        return ApiError.forbidden("Permission denied")
    if isinstance(exc, OperationalError):
        # The database is unreachable or busy (a restart, a failover, a full pool): the request may be
        # retried as it is, so a 503 with Retry-After, not a 500 (bench/faults/postgres_restart.py).
        return ApiError(
            "The database is unavailable; retry shortly.",
            status_code=503,
            code=DATABASE_UNAVAILABLE,
            extra={"retryAfter": DATABASE_RETRY_AFTER_SECONDS},
        )
    return None


def _unsupported_media_type(exc: drf_exceptions.UnsupportedMediaType, context: dict[str, Any] | None) -> ApiError:
    request = (context or {}).get("request")
    parsers = getattr(request, "parsers", None) or []
    accepted = " or ".join(parser.media_type for parser in parsers) or "application/json"
    sent = getattr(request, "content_type", "") or "none"
    return ApiError(f"Unsupported Content-Type {sent.split(';')[0]!r}: send {accepted}.", status_code=415)


def _log_server_side(error: ApiError, request: Any) -> None:
    """An ApiError of 5xx is a condition the operator must fix (REALTIME_WS_URL unset, the database
    down, ...), not a bug: one WARNING line says which, instead of the traceback of a crash."""
    method = getattr(request, "method", "?")
    path = getattr(request, "path", "?")
    logger.warning("%s %s answered %s (server side): %s", method, path, error.status_code, error.message)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    error = _as_api_error(exc, context)
    if error is None:
        return None  # unexpected: JsonErrorMiddleware logs it and answers a JSON 500
    response = Response(error.body(), status=error.status_code, headers=response_headers(error))
    if error.status_code >= 500:
        _log_server_side(error, context.get("request"))
        response._has_been_logged = True  # type: ignore[attr-defined]  # Django's private flag (not in the stubs): its request logger would log it again as an error
    if error.status_code == 429:
        # A client hammering past its limit would write a WARNING line per refused request; the limiter
        # logs refusals itself, at most one line a minute per API key (kit.api.enforce_rate_limit).
        response._has_been_logged = True  # type: ignore[attr-defined]  # Django's private flag, not in the stubs
    return response


class JsonErrorMiddleware:
    """Public API paths answer JSON even for unmatched routes and unexpected failures."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        response = self.get_response(request)
        if (
            request.path.startswith("/public/")
            and response.status_code in (404, 405)
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            message = "Not found" if response.status_code == 404 else "Method not allowed"
            return JsonResponse({"error": message}, status=response.status_code)
        return response

    def process_exception(self, request: Any, exception: Exception) -> Any:
        if not request.path.startswith("/public/"):
            return None
        error = _as_api_error(exception)
        if error is not None:
            response = JsonResponse(error.body(), status=error.status_code, headers=response_headers(error))
            if error.status_code >= 500:
                _log_server_side(error, request)
                response._has_been_logged = True  # type: ignore[attr-defined]  # Django's private flag, not in the stubs
            return response
        logger.exception("unhandled error on %s %s", request.method, request.path)
        return JsonResponse({"error": "Internal server error"}, status=500)
