"""The session shell and what it owns for every voice engine: the playout and the call records."""
