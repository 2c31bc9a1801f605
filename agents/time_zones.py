"""IANA time zones: an agent's timeZone ({{now}} in its prompt and greeting) and a call batch's window.

Only canonical names are taken: the zones of the tz database as the tzdata package ships it (its
`tzdata.zi`), the names its `zone.tab` gives each country (Europe/Amsterdam, Europe/Stockholm: kept though
the database now links them to a neighbour's zone), and `UTC` (the default). Refused: old aliases
(`US/Eastern`, `Asia/Calcutta`, `GMT`: the answer names the zone to use instead), `Factory`, and what
zoneinfo would find in the server's own /usr/share/zoneinfo without being a zone (`localtime`,
`posixrules`), so that what is accepted does not depend on the machine."""

from __future__ import annotations

import functools
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

EXAMPLE = '"Europe/Madrid"'
MAX_LENGTH = 64


def _data(name: str) -> list[str]:
    return (resources.files("tzdata") / "zoneinfo" / name).read_text(encoding="utf-8").splitlines()


@functools.cache
def canonical_time_zones() -> frozenset[str]:
    zones = {line.split()[1] for line in _data("tzdata.zi") if line.startswith("Z ")}
    countries = {line.split("\t")[2] for line in _data("zone.tab") if line and not line.startswith("#")}
    return frozenset((zones | countries | {"UTC"}) - {"Factory"})


@functools.cache
def _aliases() -> dict[str, str]:
    """Each link of the database (an old or merged name) and the zone it stands for."""
    return {parts[2]: parts[1] for parts in (line.split() for line in _data("tzdata.zi")) if parts[:1] == ["L"]}


def time_zone_problem(name: object) -> str | None:
    """Why `name` is not a canonical IANA time zone this server knows, or None when it is one."""
    if not isinstance(name, str) or not name or len(name) > MAX_LENGTH:
        return f"Unknown time zone: use an IANA time zone name such as {EXAMPLE}."
    if name in canonical_time_zones():
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
        else:
            return None
    target = _aliases().get(name)
    if target in canonical_time_zones():
        return f"Unknown time zone {name!r}: an old alias of the time zone {target}; use {target}."
    return f"Unknown time zone {name!r}: use an IANA time zone name such as {EXAMPLE}."


def time_zone_known(name: object) -> bool:
    """Whether `name` is a canonical IANA time zone (time_zone_problem)."""
    return time_zone_problem(name) is None
