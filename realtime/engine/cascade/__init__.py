"""The cascade voice engine (VOICE_ENGINE=embedded): VAD -> ASR -> brain -> TTS, and its speech kit."""
