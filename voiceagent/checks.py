"""System checks of the deployment's secrets (registered in voiceagent/apps.py), docs/operations/security.md.

With DEBUG off, REALTIME_TOKEN_SECRET (whoever knows it mints voice sessions without an API key),
WEBRTC_TURN_SECRET when set (whoever knows it relays through the TURN server) and SECRET_KEY must be at least MIN_SECRET_BYTES long, of enough different characters (kit/secret_strength.py)
and must not be a value the documentation shows: an example copied from the docs is known to everyone who
read them. The examples are read from the docs and deploy files themselves, so an example added later is
refused too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from django.conf import settings
from django.core import checks

from kit.secret_strength import secret_weakness

MIN_SECRET_BYTES = 32
# Values that appeared in earlier versions of deploy/env.example and the README.
KNOWN_EXAMPLES = frozenset({"change-me-too", "change-me-to-a-long-random-string", "change-me", "changeme", "secret"})
_DOCUMENTED = ("README.md", "docs", "deploy", "docker-compose.yml", "Makefile")
_ASSIGNMENT = re.compile(
    r"\b(?:REALTIME_TOKEN_SECRET|SECRET_KEY|WEBRTC_TURN_SECRET)[ \t]*[:=][ \t]*[\"']?([^\s\"'`<>]+)"
)


def documented_examples(base_dir: Path | None = None) -> frozenset[str]:
    """Every value a doc or deploy file assigns to a checked secret (REALTIME_TOKEN_SECRET, SECRET_KEY,
    WEBRTC_TURN_SECRET), plus the old examples."""
    base = Path(base_dir or settings.BASE_DIR)
    found = set(KNOWN_EXAMPLES)
    for name in _DOCUMENTED:
        path = base / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            try:
                text = file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            found.update(match.group(1) for match in _ASSIGNMENT.finditer(text))
    return frozenset(found)


def secret_problem(value: str, examples: frozenset[str]) -> str | None:
    return secret_weakness(value, min_bytes=MIN_SECRET_BYTES, examples=examples)


def check_secrets(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
    if settings.DEBUG:
        return []
    examples = documented_examples()
    hint = (
        "Generate one with: python -c 'import secrets; print(secrets.token_urlsafe(48))' (docs/operations/security.md)."
    )
    errors: list[checks.CheckMessage] = []
    token_secret = settings.REALTIME_TOKEN_SECRET
    problem = secret_problem(token_secret, examples) if token_secret else None
    if problem:
        errors.append(
            checks.Error(
                f"REALTIME_TOKEN_SECRET {problem}: whoever knows it can open voice sessions without an API key.",
                hint=hint,
                id="voiceagent.E001",
            )
        )
    problem = secret_problem(settings.SECRET_KEY, examples)
    if problem:
        errors.append(
            checks.Error(
                f"SECRET_KEY {problem}: it signs admin sessions and derives the stored secrets' key.",
                hint=hint,
                id="voiceagent.E002",
            )
        )
    turn_secret = settings.WEBRTC_TURN_SECRET
    problem = secret_problem(turn_secret, examples) if turn_secret else None
    if problem:
        errors.append(
            checks.Error(
                f"WEBRTC_TURN_SECRET {problem}: whoever knows it relays traffic through your TURN server.",
                hint=hint,
                id="voiceagent.E004",
            )
        )
    return errors


def check_shared_secret_key(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
    """`check --deploy` only: outside the embedded default every process must share one SECRET_KEY
    (admin sessions, stored secrets); the random one kept in var/ would differ per container. Not run
    by every command, so a developer's or CI's run on PostgreSQL works without one."""
    if settings.DEBUG or not os.environ.get("DATABASE_URL") or os.environ.get("SECRET_KEY"):
        return []
    return [
        checks.Error(
            "SECRET_KEY is not set: each process would sign with a key of its own.",
            hint="Generate one with: python -c 'import secrets; print(secrets.token_urlsafe(48))' "
            "(docs/operations/security.md).",
            id="voiceagent.E003",
        )
    ]
