"""Tools: the dispatcher (dispatcher.py) is the one place where a conversation's tools are offered
and run, whatever brain or voice engine asks for them.

    dispatcher = ToolDispatcher(agent=agent, recorder=recorder, to_number=to_number)
    specs = await dispatcher.load()              # at session start, after the call record exists
    outcome = await dispatcher.run(ToolCall(...)) # validate, deliver under timeoutMs, record, log
    await dispatcher.aclose()                     # at session end (closes the MCP sessions)

Tool kinds (registry in `KINDS`, each a small adapter): `webhook` and `http` custom tools, `mcp`
selections, and the native `search_knowledge`, `transfer_call`, `send_digits` (phone calls: keypad
tones played by the shell, `digits`) and `end_call`. `transfer_call` does not move the
call itself: its outcome carries `transfer_to`, and the session shell has the transport perform it.
"""
