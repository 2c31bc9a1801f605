"""Post-call analysis: what an agent's analysisPlan asks for (agents/analysis_plan.py), worked out of a
call once it has ended, by the configured brain.

- `runner.py`: one call's analysis (take it, read the transcript, run each enabled part, store it with
  calls.services.call_analysis_save);
- `openai_parts.py` (LLM_PROVIDER=openai): one Chat Completions request per part, JSON output checked
  with jsonschema, one repair request, then `failed` with the reason;
- `embedded_parts.py` (the embedded brain): the summary of `summary.py` (what the caller wanted, the
  tools' outcomes, how the call ended; `selectors.py` reads the call's tool calls) and the fields the
  embedded argument extractor finds in the caller's words; no success evaluation;
- `worker.py`: where it runs: a Celery task with a broker (REDIS_URL), a background thread of the server
  process otherwise, never in the path that ends the call; the upkeep sweep resumes pending analyses
  left by a process that stopped.
"""
