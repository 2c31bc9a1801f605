"""Outbound calls: the requests, rules and hang-ups (`services.py`) and the dispatcher that places queued
calls (`dispatcher.py`). Import the module you need; nothing is re-exported here.
"""
