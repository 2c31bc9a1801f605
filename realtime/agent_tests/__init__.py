"""Agent tests: what a caller says (or who a simulated caller is), mocked tool results, and what is expected
(docs/guides/agent-tests.md), run through the real runtime (docs/guides/agent-test-runs.md).

Tests: `validation.py`, `services.py`, `selectors.py`, `apis.py`, `admin.py`. Runs: `runs.py` (create, read),
`execution.py` (claim, carry out, resume), `runner.py` (one attempt through the session shell),
`session_parts.py` (no call record, mocked tools, a collecting transport, a fast clock), `judge.py` (criteria
and the simulated caller, with a model), `worker.py` and `tasks.py` (background execution), `run_apis.py`.
"""
