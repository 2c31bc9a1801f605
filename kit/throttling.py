"""Per-API-key rate limits of the public API: a token bucket per key (the plan's api_burst tokens,
refilled at api_requests_per_second), docs/operations/limits.md.

With REDIS_URL the buckets live in Redis (Django's cache, the RedisCache backend) and one Lua script
reads, refills and spends a bucket atomically with Redis's clock, so every server process draws on the
same budget. Without Redis each process keeps its own buckets (the embedded default runs one process).
A cache that fails (Redis restarting, unreachable) lets the request through with a WARNING (at most one
line a minute): a Redis blip must not turn the whole API into 500s.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache

logger = logging.getLogger(__name__)

# KEYS[1]: the bucket; ARGV: rate (tokens/s), burst (capacity). Returns {allowed 0/1, seconds to wait}.
# Redis's own clock (TIME) keeps processes with skewed clocks consistent; numbers travel as strings
# because Redis truncates Lua numbers to integers.
_BUCKET_SCRIPT = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
return {allowed, tostring(wait)}
"""

_FAILURE_LOG_INTERVAL_SECONDS = 60.0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after: int = 0  # whole seconds (the Retry-After header), at least 1 when refused


def _refused(wait_seconds: float) -> Decision:
    return Decision(allowed=False, retry_after=max(1, math.ceil(wait_seconds)))


class _LocalBuckets:
    """This process's buckets (no Redis): the same arithmetic as the Lua script, under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str, *, rate: float, burst: float) -> Decision:
        now = time.monotonic()
        with self._lock:
            tokens, at = self._buckets.get(key, (burst, now))
            tokens = min(burst, tokens + max(0.0, now - at) * rate)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return Decision(allowed=True)
            self._buckets[key] = (tokens, now)
            if len(self._buckets) > 10_000:  # keys that went quiet are full again: forget them
                self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < burst / rate}
            return _refused((1 - tokens) / rate)


_local = _LocalBuckets()
_last_failure_log = 0.0


def reset_failure_log() -> None:
    """Forget when a cache failure was last logged, so that the next one is logged again (the warning is
    written at most once a minute per process: a test that expects it starts from here)."""
    global _last_failure_log
    _last_failure_log = 0.0


def _log_cache_failure(exc: Exception) -> None:
    global _last_failure_log
    now = time.monotonic()
    if now - _last_failure_log >= _FAILURE_LOG_INTERVAL_SECONDS:
        _last_failure_log = now
        logger.warning(
            "rate limits not enforced: the cache failed (%s: %s); requests are let through", type(exc).__name__, exc
        )


def rate_limit_take(*, bucket: str, per_second: float, burst: int) -> Decision:
    """Spend one request from `bucket` (e.g. an API key's id). A rate of 0 means no limit."""
    if not settings.API_RATE_LIMITS or per_second <= 0:
        return Decision(allowed=True)
    burst = max(burst, 1)
    cache = caches[settings.API_RATE_LIMIT_CACHE]
    if not isinstance(cache, RedisCache):
        return _local.take(bucket, rate=per_second, burst=burst)
    try:
        key = cache.make_and_validate_key(f"ratelimit:{bucket}")
        client = cache._cache.get_client(key, write=True)  # type: ignore[attr-defined]  # RedisCache's private client, not in the stubs
        allowed, wait = client.eval(_BUCKET_SCRIPT, 1, key, per_second, burst)
    except Exception as exc:  # noqa: BLE001 - any cache failure fails open (module docstring)
        _log_cache_failure(exc)
        return Decision(allowed=True)
    return Decision(allowed=True) if int(allowed) else _refused(float(wait))
