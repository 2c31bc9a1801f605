"""ASGI entry point: HTTP to Django, WebSockets to the Channels consumers (Daphne serves both)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")

from django.core.asgi import get_asgi_application

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from voiceagent.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": URLRouter(websocket_urlpatterns)})
