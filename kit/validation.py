"""Shared value checks used by several apps' serializers and services."""

from __future__ import annotations

import re
import uuid
from urllib.parse import urlsplit

import httpx
import phonenumbers

from kit.errors import ApiError

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_FORBIDDEN_HEADERS = {"host", "content-length", "transfer-encoding", "connection"}
# How url_problem's refusals of a URL the HTTP client cannot send start (testing/schema_fuzzing.py knows it).
UNENCODABLE_URL = "The HTTP client cannot encode this URL"


def parse_uuid(value: str, what: str) -> uuid.UUID:
    """Path and query ids: a non-UUID is a 400 (not a 404), as the contract says."""
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        raise ApiError.invalid(f"Invalid {what} ID: {value!r} is not a UUID", {what: ["Must be a UUID."]}) from None


def e164_problem(value: str) -> str | None:
    """Why `value` is not an E.164 number, or None when it is one."""
    if not isinstance(value, str) or not re.fullmatch(r"\+[1-9]\d{1,14}", value):
        return "Must be a phone number in E.164 format, for example +14155550123."
    try:
        parsed = phonenumbers.parse(value, None)
    except phonenumbers.NumberParseException:
        return "Not a phone number."
    if not phonenumbers.is_valid_number(parsed):
        return "Not a valid phone number."
    if phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164) != value:
        return "Must be written in E.164 form."
    return None


def region_of(value: str) -> str:
    return phonenumbers.region_code_for_number(phonenumbers.parse(value, None)) or ""


def url_problem(value: str) -> str | None:
    """Why `value` is not an acceptable outbound URL (http/https, a host, no credentials), or None."""
    if not isinstance(value, str) or len(value) > 2048:
        return "Must be a URL of at most 2048 characters."
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises on a bad port
    except ValueError:
        return "Not a valid URL."
    if parts.scheme not in ("http", "https"):
        return "Only http and https URLs are allowed."
    if not parts.hostname:
        return "The URL needs a host."
    if parts.username is not None or parts.password is not None:
        return "Credentials in the URL are not allowed; use headers instead."
    if any(c.isspace() for c in value):
        return "URLs may not contain white space."
    return _encoding_problem(value)


def _encoding_problem(value: str) -> str | None:
    """Why the HTTP client (httpx) and the resolver cannot send `value` as it is written, or None: httpx
    encodes an international host name with IDNA (UTS #46) and refuses what IDNA refuses (`a\u200b.example`);
    the name it sends is then encoded for DNS (Python's `idna` codec in getaddrinfo), which refuses an empty
    label or one over 63 characters (`a..b.example`). Checked when a URL is saved, so that every request to
    it can at least be made."""
    try:
        host = httpx.URL(value).raw_host.decode("ascii")
    except (httpx.InvalidURL, UnicodeError) as exc:
        return f"{UNENCODABLE_URL}: {str(exc).rstrip('.')}."
    if not host or ":" in host or host.replace(".", "").isdigit():
        return None  # an IP address (IPv6 literals keep their colons): no DNS name to encode
    try:
        host.encode("idna")
    except UnicodeError:
        return f"{UNENCODABLE_URL}: the host name {host!r} has an empty label or one longer than 63 characters."
    return None


def headers_problem(value: object) -> str | None:
    """Why `value` is not an object of HTTP header names to string values, or None."""
    if not isinstance(value, dict):
        return "Must be an object of header names to string values."
    if len(value) > 50:
        return "At most 50 headers."
    for name, header_value in value.items():
        if not _HEADER_NAME.match(name):
            return f"{name!r} is not a valid header name."
        if name.lower() in _FORBIDDEN_HEADERS:
            return f"The {name} header is set by the service."
        if not isinstance(header_value, str):
            return f"The value of {name} must be a string."
        if len(header_value) > 4096 or any(c in header_value for c in "\r\n\0"):
            return f"The value of {name} is too long or contains line breaks."
    return None
