"""The speech-to-speech voice engine (VOICE_ENGINE=speech-to-speech): a provider speaking the OpenAI Realtime protocol."""
