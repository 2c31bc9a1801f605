"""Session tokens: signature, expiry, agent, single use (the database decides, for every process)."""

from __future__ import annotations

import time
import uuid

import pytest
from django.core import signing

from realtime import tokens
from realtime.models import UsedSessionToken
from realtime.services import session_token_redeem

pytestmark = pytest.mark.django_db


def issue(agent, now=None) -> str:
    token, _ = tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id, now=now)
    return token


def close_code(excinfo) -> int:
    return excinfo.value.close_code


def test_a_fresh_token_opens_once_and_names_the_agent(active_agent, realtime_settings):
    agent = session_token_redeem(token=issue(active_agent), agent_id=str(active_agent.pk))
    assert agent.pk == active_agent.pk
    assert UsedSessionToken.objects.filter(agent_id=active_agent.pk).count() == 1


def test_it_rejects_a_reused_token(active_agent, realtime_settings):
    token = issue(active_agent)
    session_token_redeem(token=token, agent_id=str(active_agent.pk))
    with pytest.raises(tokens.TokenError) as excinfo:
        session_token_redeem(token=token, agent_id=str(active_agent.pk))
    assert close_code(excinfo) == tokens.CLOSE_CONFLICT == 4409


def test_it_rejects_an_expired_token(active_agent, realtime_settings):
    token = issue(active_agent, now=time.time() - 61)
    with pytest.raises(tokens.TokenError) as excinfo:
        session_token_redeem(token=token, agent_id=str(active_agent.pk))
    assert close_code(excinfo) == tokens.CLOSE_INVALID_TOKEN == 4401
    assert not UsedSessionToken.objects.exists()


def test_a_token_is_valid_for_sixty_seconds(active_agent, realtime_settings):
    issued = time.time()
    token = issue(active_agent, now=issued)
    assert tokens.verify_token(token, agent_id=str(active_agent.pk), now=issued + 59.5)
    with pytest.raises(tokens.TokenError):
        tokens.verify_token(token, agent_id=str(active_agent.pk), now=issued + 60.01)


def test_it_rejects_a_tampered_token(active_agent, realtime_settings, outsider, make_agent):
    token = issue(active_agent)
    payload, rest = token.split(":", 1)
    data = signing.b64_decode(payload.encode()).replace(b'"o":"', b'"o":"0')
    forged = signing.b64_encode(data).decode() + ":" + rest
    for bad in (forged, token[:-2] + ("AA" if not token.endswith("AA") else "BB"), "garbage", ""):
        with pytest.raises(tokens.TokenError) as excinfo:
            session_token_redeem(token=bad, agent_id=str(active_agent.pk))
        assert close_code(excinfo) == 4401


def test_a_token_signed_with_another_secret_is_invalid(active_agent, realtime_settings):
    token = issue(active_agent)
    realtime_settings.REALTIME_TOKEN_SECRET = "another-secret"
    with pytest.raises(tokens.TokenError) as excinfo:
        session_token_redeem(token=token, agent_id=str(active_agent.pk))
    assert close_code(excinfo) == 4401


def test_it_rejects_a_token_for_another_agent_without_spending_it(active_agent, owner, make_agent, realtime_settings):
    other = make_agent(owner.organization, name="Other", status="active")
    token = issue(active_agent)
    with pytest.raises(tokens.TokenError) as excinfo:
        session_token_redeem(token=token, agent_id=str(other.pk))
    assert close_code(excinfo) == tokens.CLOSE_WRONG_AGENT == 4403
    with pytest.raises(tokens.TokenError):
        session_token_redeem(token=token, agent_id=str(uuid.uuid4()))
    assert session_token_redeem(token=token, agent_id=str(active_agent.pk)).pk == active_agent.pk


def test_it_rejects_a_token_of_an_agent_deactivated_since(active_agent, realtime_settings):
    token = issue(active_agent)
    active_agent.status = "inactive"
    active_agent.save(update_fields=["status"])
    with pytest.raises(tokens.TokenError) as excinfo:
        session_token_redeem(token=token, agent_id=str(active_agent.pk))
    assert close_code(excinfo) == 4409


def test_a_deleted_agent_is_not_found(active_agent, realtime_settings):
    token = issue(active_agent)
    agent_id = str(active_agent.pk)
    active_agent.delete()
    with pytest.raises(tokens.TokenError) as excinfo:
        session_token_redeem(token=token, agent_id=agent_id)
    assert close_code(excinfo) == 4404


def test_the_token_does_not_show_the_browser_which_agent_or_organization(active_agent, realtime_settings):
    # What a browser user can read from the websocketUrl's token: a token id and an expiry, no ids.
    token = issue(active_agent)
    readable = signing.b64_decode(token.split(":", 1)[0].encode()).decode()
    for ident in (active_agent.pk, active_agent.organization_id):
        assert str(ident) not in readable and ident.hex not in readable
    claims = tokens.verify_token(token, agent_id=str(active_agent.pk))
    assert (claims.agent_id, claims.organization_id) == (active_agent.pk, active_agent.organization_id)
