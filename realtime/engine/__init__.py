"""The conversation engine: transport-agnostic asyncio stages (listen -> brain -> speech -> playout).

`Conversation` (conversation.py) joins the stages; a transport (browser socket, phone media stream)
implements `Transport` (transport.py) and pushes caller audio in with `Conversation.push_audio`.
"""
