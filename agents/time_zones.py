"""IANA time zones: an agent's timeZone ({{now}} in its prompt and greeting) is checked with zoneinfo."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def time_zone_known(name: object) -> bool:
    """Whether `name` is an IANA time zone this server knows (zoneinfo, with the tzdata package)."""
    if not isinstance(name, str) or not name or len(name) > 64 or name.startswith(("/", ".")) or ".." in name:
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True
