"""The speech-to-speech voice engine (VOICE_ENGINE=realtime): a provider speaking the OpenAI Realtime protocol."""
