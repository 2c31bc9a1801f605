"""Telephony's writes and rules, by seam: numbers (claiming and assignment to agents), accounts (the
organization's carrier account, the public callback URLs, pointing numbers at this service) and calls
(answering incoming calls and their status callbacks). Import the module you need; nothing is re-exported
here.
"""
