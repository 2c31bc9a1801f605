"""Whether a configured secret is too weak to use: the one rule of every secret the service checks
(REALTIME_TOKEN_SECRET, SECRET_KEY: voiceagent/checks.py; METRICS_TOKEN: kit/metrics.py).

A secret is refused when it is an example the documentation shows, shorter than its minimum, or made of
too few different characters: its Shannon entropy per character (from how often each character occurs)
below MIN_BITS_PER_CHAR. Thirty-two identical characters have 0 bits, `abab...` 1, `abcdabcd...` 2;
`secrets.token_hex(16)` has about 3.6 (2.6 at worst in 200,000 draws), `secrets.token_urlsafe(48)` about
5.2. This catches a repeated or few-letter value, not every pattern: generate secrets, never type them.
"""

from __future__ import annotations

import math
from collections import Counter

MIN_BITS_PER_CHAR = 2.5


def bits_per_char(value: str) -> float:
    """The Shannon entropy of `value`'s characters, in bits per character (0 for an empty value)."""
    if not value:
        return 0.0
    total = len(value)
    return -sum(count / total * math.log2(count / total) for count in Counter(value).values())


def secret_weakness(value: str, *, min_bytes: int, examples: frozenset[str] = frozenset()) -> str | None:
    """Why `value` is too weak as a secret (a phrase to follow its name: "is shorter than 32 bytes"), or
    None. Never the value itself: the reason is logged."""
    stripped = value.strip()
    if stripped in examples or stripped.lower() in examples:
        return "is an example value from the documentation"
    if len(value.encode()) < min_bytes:
        return f"is shorter than {min_bytes} bytes"
    if bits_per_char(value) < MIN_BITS_PER_CHAR:
        return (
            f"has too few different characters (under {MIN_BITS_PER_CHAR:g} bits of entropy per character): "
            "it is guessable whatever its length"
        )
    return None
