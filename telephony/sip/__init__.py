"""The service's own SIP endpoint (`manage.py sipserver`): calls from a SIP trunk or PBX of an account of
provider `sip`, answered by the called number's agent through the same session engine as every other
transport. Signalling and media are Sippy's (the `sippy` package: an RFC 3261 stack, and its RTP
endpoint over `rtpsynth`, with a jitter buffer on receive and paced sending); `admission.py` decides who
may call, `endpoint.py` runs the calls."""
