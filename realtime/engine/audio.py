"""The engine's audio format, defined once: every rate, frame length and byte count of the audio that
flows through the engine comes from here (transports, sound, speech and pipelines import it), so that
a bare 16000, 24000 or 960 never appears in a second place.

- Caller audio enters the engine as PCM16 LE mono at IN_RATE (what the recognizers and the voice
  activity detector take).
- Agent audio leaves it as PCM16 LE mono at OUT_RATE, in whole frames of FRAME_MS (the playout's and
  the mixer's unit, what transports send).
- A phone line carries G.711 mu-law (one byte per sample) at PHONE_RATE in frames of FRAME_MS.
"""

from __future__ import annotations

SAMPLE_BYTES = 2  # PCM16
IN_RATE = 16000  # caller audio into the engine, samples per second
OUT_RATE = 24000  # agent audio out of the engine, samples per second
PHONE_RATE = 8000  # a phone line (G.711 mu-law, one byte per sample)
FRAME_MS = 20  # the playout's frame, and a phone stream's
FRAME_SECONDS = FRAME_MS / 1000

IN_BYTES_PER_MS = IN_RATE * SAMPLE_BYTES // 1000  # 32
OUT_BYTES_PER_MS = OUT_RATE * SAMPLE_BYTES // 1000  # 48
IN_BYTES_PER_SECOND = IN_RATE * SAMPLE_BYTES  # 32000
# The piece caller audio is listened to and recognized in, whatever pieces it arrived in: a caller's frame (the
# browser client and phone streams send 20 ms). The listener gives the recognizer whole pieces, which it
# decodes as they come, so its words so far hold all it was given.
LISTEN_MS = FRAME_MS
LISTEN_BYTES = LISTEN_MS * IN_BYTES_PER_MS  # 640
OUT_BYTES_PER_SECOND = OUT_RATE * SAMPLE_BYTES  # 48000
OUT_FRAME_SAMPLES = OUT_RATE * FRAME_MS // 1000  # 480
OUT_FRAME_BYTES = OUT_FRAME_SAMPLES * SAMPLE_BYTES  # 960: one frame of agent audio
PHONE_FRAME_BYTES = PHONE_RATE * FRAME_MS // 1000  # 160: one frame of mu-law
