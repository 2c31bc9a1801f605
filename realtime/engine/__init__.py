"""The conversation engine: transport-agnostic asyncio stages, laid out by floor (lowest first).

- contracts.py, audio.py, response.py, timing.py, clock.py: what every part agrees on (the pipeline,
  transport, brain, speech-part and recorder contracts; the audio format; the response handle).
- registry.py: the voice engines by name (each imported lazily); prompt.py, phrases.py: words.
- session/: the shell every engine runs in (shell.py), its playout and its call records.
- cascade/: VAD -> ASR -> brain -> TTS (pipeline, listener, turn-taking, its speech kit).
- speech_to_speech/: a provider speaking the OpenAI Realtime protocol.
- brain/, speech/, sound/, tools/: brains, speech recognisers and voices, the mixer, tool kinds.

A transport (browser socket, phone media stream) implements `Transport` (contracts.py), starts a
conversation with `open_session` (session/shell.py) and pushes caller audio in with `push_audio`.
"""
