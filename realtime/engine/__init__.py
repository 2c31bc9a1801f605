"""The conversation engine: transport-agnostic asyncio stages, laid out by floor (lowest first; a
module imports only from its own floor or below).

- contracts.py, audio.py, timing.py, clock.py: what every part agrees on (the pipeline, conversation,
  transport, brain, speech-part and recorder contracts and the response handle; the audio format;
  turn timing; the engine's clock).
- brain/, speech/, sound/, tools/: brains, speech recognisers and voices, the mixer, tool kinds;
  instructions.py (the agent's instructions to a model), prompt.py (a dynamic prompt), phrases.py.
- registry.py: the voice engines by name, each imported lazily by its dotted path.
- cascade/ (VAD -> ASR -> brain -> TTS: pipeline, listener, turn-taking, its speech kit) and
  speech_to_speech/ (a provider speaking the OpenAI Realtime protocol): the voice pipelines, which
  serve the `Conversation` contract and import nothing of the session.
- session/: the shell every engine runs in (shell.py), its playout and its call records.

A transport (browser socket, phone media stream) implements `Transport` (contracts.py), starts a
conversation with `open_session` (session/shell.py) and pushes caller audio in with `push_audio`.
"""
