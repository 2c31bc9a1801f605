"""The agent resource (/public/v1/agents, /public/v1/agents/{agentId}): views (`apis.py`), routes
(`urls.py`) and the list and detail reads (`selectors.py`) that join agents, telephony, knowledge and calls.
Import the module you need; nothing is re-exported here.
"""
