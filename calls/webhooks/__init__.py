"""Call events and the webhooks that receive them (docs/reference/webhooks.md).

events.py records call events in an outbox and delivers them (retries, redelivery, the endpoints'
auto-disable); services.py holds the rules of the organization webhooks (create, update, delete, rotate
the secret), selectors.py the reads of webhooks and deliveries, serializers.py the wire shapes, apis.py
the REST views (`/public/v1/webhooks`, `/public/v1/webhook-deliveries`) and admin.py the dashboard pages
(imported by calls/admin.py, which shows a call's deliveries)."""
