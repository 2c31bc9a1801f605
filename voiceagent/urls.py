from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerSplitView

from kit import schema as _schema  # noqa: F401 - registers the OpenAPI field descriptions
from kit.metrics import metrics_view
from voiceagent.health import healthz, livez

public_v1 = [
    path("", include("api.agents.urls")),
    path("", include("api.organization.urls")),
    path("", include("agents.urls")),
    path("", include("telephony.urls")),
    path("", include("knowledge.urls")),
    path("", include("calls.urls")),
    path("", include("realtime.urls")),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("livez", livez, name="livez"),
    path("metrics", metrics_view, name="metrics"),  # Prometheus (docs/operations/metrics.md): token or loopback only
    # The agent page's "Talk to this agent" panel (realtime/talk_admin.py), under the admin's prefix.
    path("admin/", include("realtime.talk_admin")),
    path("admin/", include("realtime.widget.admin")),  # the agent page's widget keys (add, delete)
    path("admin/", admin.site.urls),
    path("public/v1/", include(public_v1)),
    path(
        "public/v1/openapi.json",
        SpectacularJSONAPIView.as_view(authentication_classes=[], permission_classes=[]),
        name="openapi",
    ),
    path(
        "docs/",
        # The split view serves Swagger UI's start-up script from /docs/?script: no inline script (CSP).
        SpectacularSwaggerSplitView.as_view(
            url_name="openapi",
            template_name="docs/swagger_ui.html",
            authentication_classes=[],
            permission_classes=[],
        ),
        name="docs",
    ),
    path("", include("telephony.webhook_urls")),
    path("", include("realtime.webrtc.urls")),  # WebRTC sessions' offerUrl (docs/webrtc.md): the token is the key
    path("", include("realtime.demo")),  # /demo/: only while DEMO_PAGES is on
    path("", include("voiceagent.landing")),
]
