"""The `embedded` brain: an offline, deterministic, rule-based responder (not a language model).

responder.py is the brain (`EmbeddedBrain`, registered in realtime/engine/brain/__init__.py); it
understands caller turns by word matching (understanding.py), reads values said aloud (spoken.py), fills
tool arguments (arguments.py), finds keys to press (keys.py) and words its answers (replies.py). The
embedded call analysis (realtime/analysis/embedded_parts.py) reuses its argument extractor."""
