"""The Redis cache backend with one client per process.

Django makes a cache object per request context (its `caches` are context-local: under ASGI every request
is a context of its own), and its RedisCache gives every object a client with a connection pool of its
own. Every request that touched the cache (each API request does: the rate limiter) opened a new Redis
connection, left open until the garbage collector got to it (a server held 73 Redis connections after
480 requests, 6 with this backend). Here every cache object of one configuration shares one client;
redis-py's connection pool is thread-safe and hands each thread a connection of its own while it runs a
command.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache
from django.utils.functional import cached_property

_clients: dict[str, Any] = {}
_lock = threading.Lock()


class SharedRedisCache(RedisCache):
    @cached_property
    def _cache(self) -> Any:
        this: Any = self  # RedisCache's _servers, _options and _class are not in django-stubs
        key = repr((this._servers, sorted(this._options.items())))
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = this._class(this._servers, **this._options)
        return client
