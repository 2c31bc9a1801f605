"""WebRTC voice sessions (docs/webrtc.md), on aiortc: a client POSTs its SDP offer to the session's offerUrl
(views.py), the server answers and holds the peer connection in this process's event loop (peer.py: the
engine's Transport over it, its `events` data channel and its audio tracks, media.py); ICE servers, TURN
credentials and the host candidates' addresses come from the settings (ice.py).

aiortc (and av, aioice) is imported when the first offer arrives, not with this package: every process
start would pay for it otherwise (docs/internals/architecture.md, "A new provider")."""
