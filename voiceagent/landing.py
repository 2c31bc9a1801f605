"""The page at `/`: what this server is and where to go (the dashboard's "View site" link lands here);
and /favicon.ico, which browsers ask for on pages that name no icon."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import path
from django.views.decorators.http import require_safe


@require_safe
def landing(request: HttpRequest) -> HttpResponse:
    return render(request, "landing.html", {"demo_pages": settings.DEMO_PAGES})


@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    return redirect(static("voiceagent/favicon.png"), permanent=True)


urlpatterns = [path("", landing, name="landing"), path("favicon.ico", favicon, name="favicon")]
