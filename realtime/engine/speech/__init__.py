"""The offline speech parts of the `embedded` voice engine, loaded once per process and shared by
every session: Silero VAD on onnxruntime (vad.py), PocketSphinx with a per-agent language model
(asr.py, language_model.py) and eSpeak NG through the espeakng-loader wheel (tts.py)."""
