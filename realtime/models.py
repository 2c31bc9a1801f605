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
