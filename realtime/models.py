"""Realtime session state that must hold across server processes."""

from django.db import models


class UsedSessionToken(models.Model):
    """One row per session token that opened a socket. The primary key makes a token single-use for
    every process sharing the database: a second insert of the same id fails."""

    token_id = models.CharField(primary_key=True, max_length=32)
    organization_id = models.UUIDField()
    agent_id = models.UUIDField()
    used_at = models.DateTimeField()
    # After this moment the token is refused as expired anyway, so the row may be purged.
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-used_at"]

    def __str__(self) -> str:
        return self.token_id


class SessionVariables(models.Model):
    """The per-call `variables` and `metadata` given when a session token was issued (README, "Per-call
    variables"), kept here under the token's id, never in the token or its URL: the socket that spends
    the token takes them (and deletes the row) for its call record. A row of a token never spent is
    purged once the token has expired."""

    token_id = models.CharField(primary_key=True, max_length=32)
    variables = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(null=True, blank=True)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.token_id
