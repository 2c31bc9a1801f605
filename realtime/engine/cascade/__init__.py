"""The cascade voice engine (VOICE_ENGINE=cascade): VAD -> ASR -> brain -> TTS, and its speech kit."""
