"""Signals of the calls app, for the apps above it (they may not be imported by calls).

`call_ended`: sent once a call has ended, after the transaction that ended it commits (so a receiver
sees the final row); `call_id` is the call's id. Every ending sends it exactly once: `_finish` for a
call that was live, and the ending of an outbound call that was never answered. Receivers must not
raise (a failure is logged by the sender and ignored).
"""

from django.dispatch import Signal

call_ended = Signal()
