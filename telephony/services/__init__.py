"""Telephony's writes and rules, by seam: numbers (claiming and assignment to agents), accounts (the
organization's carrier account, the public callback URLs, pointing numbers at this service) and calls
(answering incoming calls and their status callbacks), agents (the agent writes with their phone numbers). Import the module you need; nothing is re-exported
here.
"""
