"""Call analytics (docs/costs.md): calls, minutes and cost of an organization's calls grouped by agent, UTC
day, direction, a per-call variable or a metadata key.

selectors.py holds the grouped reads (one GROUP BY query over the calls of a range, in the (organization,
started_at) index) and the dashboard's cost figures (the usage page: cost per day and per agent);
serializers.py the query's rules and the wire shapes; apis.py the REST view (`/public/v1/analytics/calls`).
"""
