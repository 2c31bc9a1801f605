"""Media-stream tokens: signed, short-lived, single-use across processes sharing the database, and
not interchangeable with realtime session tokens."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from realtime import tokens
from realtime.models import UsedSessionToken
from telephony.streams import STREAM_TOKEN_TTL_SECONDS, StreamGrant, stream_token_issue, stream_token_redeem
from testing.twilio_webhooks import public_settings  # noqa: F401 - fixture

pytestmark = [pytest.mark.usefixtures("public_settings"), pytest.mark.django_db]

IDS = {"organization_id": uuid.uuid4(), "agent_id": uuid.uuid4(), "phone_number_id": uuid.uuid4()}
CALL = {"call_sid": "CA" + "5" * 32, "from_number": "+14155550199", "to_number": "+14155550123"}


def test_a_token_redeems_once_into_its_grant() -> None:
    token = stream_token_issue(**IDS, **CALL)
    assert stream_token_redeem(token) == StreamGrant(**IDS, **CALL)
    with pytest.raises(tokens.TokenError) as caught:
        stream_token_redeem(token)
    assert (caught.value.message, caught.value.close_code) == ("Stream token already used", tokens.CLOSE_CONFLICT)
    assert UsedSessionToken.objects.count() == 1


def test_an_expired_token_is_refused_and_not_spent() -> None:
    issued = time.time() - STREAM_TOKEN_TTL_SECONDS - 1
    token = stream_token_issue(**IDS, **CALL, now=issued)
    with pytest.raises(tokens.TokenError, match="Stream token expired"):
        stream_token_redeem(token)
    assert UsedSessionToken.objects.count() == 0


@pytest.mark.parametrize("bad", [None, "", "garbage", "tampered", "other-secret", "session-token"])
def test_missing_malformed_tampered_or_foreign_tokens_are_refused(bad: str | None, settings: Any) -> None:
    token = bad
    if bad == "tampered":
        good = stream_token_issue(**IDS, **CALL)
        token = good[:-2] + ("AA" if not good.endswith("AA") else "BB")
    elif bad == "other-secret":
        settings.REALTIME_TOKEN_SECRET = "another-secret-of-another-deployment"
        token = stream_token_issue(**IDS, **CALL)
        settings.REALTIME_TOKEN_SECRET = "stream-token-test-secret-0123456789"
    elif bad == "session-token":
        token, _ = tokens.issue_token(agent_id=IDS["agent_id"], organization_id=IDS["organization_id"])
    with pytest.raises(tokens.TokenError) as caught:
        stream_token_redeem(token)
    assert caught.value.close_code == tokens.CLOSE_INVALID_TOKEN
    assert caught.value.message in ("Missing stream token", "Invalid stream token")


def test_a_stream_token_does_not_open_a_browser_session() -> None:
    token = stream_token_issue(**IDS, **CALL)
    with pytest.raises(tokens.TokenError, match="Invalid session token"):
        tokens.verify_token(token, agent_id=str(IDS["agent_id"]))


def test_without_a_secret_no_token_is_issued(settings: Any) -> None:
    settings.REALTIME_TOKEN_SECRET = ""
    with pytest.raises(tokens.TokenError) as caught:
        stream_token_issue(**IDS, **CALL)
    assert caught.value.close_code == tokens.CLOSE_NOT_CONFIGURED
