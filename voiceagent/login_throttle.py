"""Admin login throttling (django-axes), docs/operations/security.md."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend


class AdminLoginThrottleBackend(AxesStandaloneBackend):
    """Axes' backend for every login that comes with a request (the admin's login form: the only password
    login this service has). Without a request (Django's test client `login()`, scripts) there is no client
    address to throttle, and axes would raise instead of passing on to the next backend."""

    def authenticate(self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
