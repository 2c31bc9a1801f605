"""The thin-view kit shared by every app's public API views."""

from __future__ import annotations

from typing import Any

from rest_framework.views import APIView

from accounts.models import Organization


class PublicApiView(APIView):
    """Base of every /public/v1 view: Bearer API-key auth, JSON errors, the caller's organization."""

    @property
    def organization(self) -> Organization:
        return self.request.user.organization

    def get_exception_handler_context(self) -> dict[str, Any]:
        return super().get_exception_handler_context()
