"""Budgets (docs/costs.md): spending limits over an agent's calls, a variable's value or the whole
organization, per UTC day or month; `budget.threshold` events at 80% and 100%, and with `block`, new
sessions and outbound calls in scope refused (402 BUDGET_EXCEEDED) and campaigns in scope paused."""
