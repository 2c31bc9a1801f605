"""Agent tests: what a caller says (or who a simulated caller is), mocked tool results, and what is expected
(docs/agent-tests.md). The API, the dashboard and `test_run_create` (runs.py) all go through services.py."""
