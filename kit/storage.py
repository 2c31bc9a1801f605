"""A Django STORAGES entry from one URL-style setting (RECORDINGS_STORAGE_URL): read by the settings module,
so it imports nothing of Django's apps."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

S3_PARAMETERS = {"endpoint_url", "region_name", "addressing_style", "signature_version"}


def storage_from_url(
    url: str, *, default_location: str, access_key: str = "", secret_key: str = "", name: str = "storage URL"
) -> dict[str, Any]:
    """Empty or file:///folder: the local filesystem (`default_location` when empty); s3://bucket/prefix
    ?endpoint_url=...&region_name=...: an S3-compatible store through django-storages (credentials given, or
    boto3's usual chain: environment, instance role). Anything else is a configuration error."""
    url = url.strip()
    parts = urlsplit(url)
    if not url or parts.scheme == "file":
        location = unquote(parts.path) if url and parts.path else default_location
        return {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": location}}
    if parts.scheme != "s3" or not parts.hostname:
        raise ImproperlyConfigured(f"{name} must be file:///a/folder or s3://bucket/prefix?endpoint_url=...")
    query = dict(parse_qsl(parts.query))
    unknown = set(query) - S3_PARAMETERS
    if unknown:
        raise ImproperlyConfigured(f"{name}: unknown parameter(s) {', '.join(sorted(unknown))}")
    options: dict[str, Any] = {
        "bucket_name": parts.netloc,
        "location": parts.path.strip("/"),
        "default_acl": None,
        "file_overwrite": True,
        "querystring_auth": False,
        **query,
    }
    if access_key:
        options["access_key"] = access_key
        options["secret_key"] = secret_key
    return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}
