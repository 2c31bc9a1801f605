"""Your server opens the voice session with the API key; the page gets only `websocketUrl` (docs/guides/browser-client.md).
Run: VOICE_AGENT_API_KEY=va_... VOICE_AGENT_ID=... python session_backend.py; the page POSTs to http://127.0.0.1:8080/.
VOICE_AGENT_BASE_URL is the service's address (default http://127.0.0.1:8000, `make run`'s)."""

import json
import os
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API = os.environ.get("VOICE_AGENT_BASE_URL", "http://127.0.0.1:8000").rstrip("/") + "/public/v1"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # check your own user's login here before opening a session
        url = f"{API}/agents/{os.environ['VOICE_AGENT_ID']}/realtime-sessions"
        headers = {"Authorization": f"Bearer {os.environ['VOICE_AGENT_API_KEY']}"}
        request = urllib.request.Request(url, method="POST", headers=headers)  # noqa: S310 - our own API's URL
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - the same URL, our own API's
            body = json.dumps({"websocketUrl": json.load(answer)["websocketUrl"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)


ThreadingHTTPServer(("127.0.0.1", 8080), Handler).serve_forever()
