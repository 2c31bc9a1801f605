"""The ICE settings of WebRTC sessions (realtime/webrtc/ice.py): TURN credentials as coturn's
use-auth-secret checks them, the iceServers clients are given, the host candidates' addresses put in
aioice's place, and the settings' own checks (a bad URL stops the service, a weak TURN secret is refused)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import subprocess
import sys

from realtime.webrtc import ice
from testing.daphne import REPO

SECRET = "turn-shared-secret-0123456789abcdef-XYZ"


def test_turn_credentials_are_coturn_s_rest_credentials(settings):
    settings.WEBRTC_TURN_SECRET = SECRET
    settings.WEBRTC_TURN_TTL_SECONDS = 600
    username, credential = ice.turn_credentials(now=1_800_000_000.7)
    expiry, random_id = username.split(":")
    assert expiry == "1800000600" and len(random_id) == 16
    expected = base64.b64encode(hmac.new(SECRET.encode(), username.encode(), hashlib.sha1).digest()).decode()
    assert credential == expected
    assert ice.turn_credentials(now=1_800_000_000)[0] != username  # a random id each time


def test_clients_get_the_stun_and_turn_urls_with_fresh_credentials(settings):
    settings.WEBRTC_ICE_SERVERS = []
    assert ice.client_ice_servers() == []
    settings.WEBRTC_ICE_SERVERS = ["stun:stun.example.com:3478", "turn:turn.example.com", "turns:turn.example.com:443"]
    settings.WEBRTC_TURN_SECRET = SECRET
    stun, turn = ice.client_ice_servers(now=1_800_000_000)
    assert stun == {"urls": ["stun:stun.example.com:3478"]}
    assert turn["urls"] == ["turn:turn.example.com", "turns:turn.example.com:443"]
    assert turn["username"].startswith("1800003600:")
    servers = ice.server_ice_servers()  # the same, as aiortc takes them
    assert [server.urls for server in servers] == [stun["urls"], turn["urls"]]


def test_the_host_candidates_are_the_configured_addresses(settings):
    from aioice import ice as aioice

    ice.use_host_addresses()
    ice.use_host_addresses()  # once
    settings.WEBRTC_HOST_ADDRESSES = ["127.0.0.1", "::1"]
    assert aioice.get_host_addresses(use_ipv4=True, use_ipv6=True) == ["127.0.0.1", "::1"]
    assert aioice.get_host_addresses(use_ipv4=True, use_ipv6=False) == ["127.0.0.1"]
    settings.WEBRTC_HOST_ADDRESSES = []  # aioice's own rule: every address of the machine but loopback
    assert "127.0.0.1" not in aioice.get_host_addresses(use_ipv4=True, use_ipv6=False)


def _settings_error(**env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "voiceagent.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stderr.strip().splitlines()[-1] if done.returncode else ""


def test_settings_that_cannot_work_stop_the_service_with_the_reason():
    assert "is not a stun:, turn: or turns: URL" in _settings_error(WEBRTC_ICE_SERVERS="https://turn.example.com")
    assert "set WEBRTC_TURN_SECRET" in _settings_error(WEBRTC_ICE_SERVERS="turn:turn.example.com:3478")
    assert "is not an IP address" in _settings_error(WEBRTC_HOST_ADDRESSES="localhost")
    assert _settings_error(WEBRTC_ICE_SERVERS="stun:stun.example.com:3478", WEBRTC_HOST_ADDRESSES="10.0.0.5") == ""


def test_a_weak_turn_secret_is_refused_like_the_other_secrets(settings):
    from voiceagent.checks import check_secrets

    settings.DEBUG = False
    settings.SECRET_KEY = secrets.token_urlsafe(48)
    settings.REALTIME_TOKEN_SECRET = secrets.token_urlsafe(48)
    settings.WEBRTC_TURN_SECRET = "t" * 40
    assert [error.id for error in check_secrets()] == ["voiceagent.E004"]
    settings.WEBRTC_TURN_SECRET = secrets.token_urlsafe(32)
    assert [error.id for error in check_secrets()] == []
