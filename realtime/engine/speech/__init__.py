"""The speech parts of the `cascade` voice engine, each module named by the engine it wraps. The offline
ones, loaded once per process and shared by every session: Silero VAD on onnxruntime (silero_vad.py),
PocketSphinx with a per-agent language model (pocketsphinx.py and its worker processes,
pocketsphinx_workers.py; decoder.py, language_model.py) and eSpeak NG through the espeakng-loader wheel
(espeak.py). The providers beside them (providers.py): an OpenAI-compatible audio API (openai_audio.py),
Whisper (whisper.py) and Piper (piper.py)."""
