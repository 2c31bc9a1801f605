"""Agent tests: what a caller says and what the agent must do, run through the real runtime.

Runs: `runs.py` (create, read), `execution.py` (claim, carry out, resume), `runner.py` (one attempt
through the session shell), `session_parts.py` (no call record, mocked tools, a collecting transport, a
fast clock), `judge.py` (criteria and the simulated caller, with a model), `worker.py` and `tasks.py`
(background execution), `run_apis.py` (the runs API). docs/agent-test-runs.md.
"""
