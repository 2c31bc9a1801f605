"""Telephony's writes and rules, by seam: numbers (claiming and assignment to agents), accounts (the
organization's carrier account, the public callback URLs, pointing numbers at this service), calls
(answering incoming calls and their status callbacks) and agents (telephony's steps of the agent writes:
numbers, call batches). Import the module you need; nothing is re-exported here.
"""
