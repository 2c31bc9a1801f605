"""The page at `/`: what this server is and where to go (the dashboard's "View site" link lands here)."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_safe


@require_safe
def landing(request: HttpRequest) -> HttpResponse:
    return render(request, "landing.html", {"demo_pages": settings.DEMO_PAGES})


urlpatterns = [path("", landing, name="landing")]
