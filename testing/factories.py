"""Model factories (factory-boy) for the rows tests set up directly, without the API.

A factory fills what a test does not care about with the values the tests used when they wrote rows by
hand, and follows the model's own ties: an agent's organization, a document's or a call's organization
taken from its agent. What a test asserts on it still passes by name (`AgentFactory(organization=...,
name="Ava", status="active")`). Rules (limits, validation, billing) are tested through the API and the
services; these factories write rows as they are, like `Model.objects.create`.

API keys are stored hashed: `ApiKeyFactory` issues one through accounts.services and returns the
`IssuedKey` (the row and the raw key, which only the issuer ever sees).
"""

from __future__ import annotations

from typing import Any

import factory
from django.utils import timezone
from factory.django import DjangoModelFactory

from accounts.models import Organization
from accounts.services import apikey_create, plan_get
from agents.models import Agent, AgentTool, McpServer
from calls.models import Call
from knowledge.models import KnowledgeDocument
from realtime.models import TestAttempt, TestRun
from telephony.models import PhoneNumber


class OrganizationFactory(DjangoModelFactory[Organization]):
    """An organization on a seeded plan (`plan_code`, the Studio plan unless told), on trial only on the
    trial plan (as organization_create sets it); no API key: see ApiKeyFactory."""

    class Meta:
        model = Organization

    class Params:
        plan_code = "studio"

    name = factory.Sequence(lambda n: f"Organization {n}")
    plan = factory.LazyAttribute(lambda o: plan_get(code=o.plan_code))
    on_trial = factory.LazyAttribute(lambda o: o.plan_code == "trial")


class ApiKeyFactory(factory.Factory):
    """An API key of an organization, issued by the service (the row keeps only its hash)."""

    class Meta:
        model = staticmethod(apikey_create)

    organization = factory.SubFactory(OrganizationFactory)
    name = ""


class AgentFactory(DjangoModelFactory[Agent]):
    class Meta:
        model = Agent

    organization = factory.SubFactory(OrganizationFactory)
    name = "Support"
    agent_type = "webhook"
    instructions = "Help callers with their orders."
    updated_at = factory.LazyFunction(timezone.now)


class AgentToolFactory(DjangoModelFactory[AgentTool]):
    class Meta:
        model = AgentTool

    agent = factory.SubFactory(AgentFactory)
    name = "order_status"


class McpServerFactory(DjangoModelFactory[McpServer]):
    class Meta:
        model = McpServer

    organization = factory.SubFactory(OrganizationFactory)
    name = "Orders"
    url = "https://mcp.example.com"
    status = "active"


class KnowledgeDocumentFactory(DjangoModelFactory[KnowledgeDocument]):
    """A document row of an agent (its chunks are the test's: ingestion is tested through uploads)."""

    class Meta:
        model = KnowledgeDocument

    agent = factory.SubFactory(AgentFactory)
    organization = factory.SelfAttribute("agent.organization")
    name = "Policy"
    type = "markdown"
    size_bytes = 10
    status = "ready"


class CallFactory(DjangoModelFactory[Call]):
    """A browser call of an agent that started now and is still active."""

    class Meta:
        model = Call

    agent = factory.SubFactory(AgentFactory)
    organization = factory.SelfAttribute("agent.organization")
    agent_name = factory.SelfAttribute("agent.name")
    channel = "web"
    from_number = "web-client"
    to_number = "web-agent"
    status = "active"
    started_at = factory.LazyFunction(timezone.now)


class PhoneNumberFactory(DjangoModelFactory[PhoneNumber]):
    """A claimed Twilio number of an organization (not assigned to an agent)."""

    class Meta:
        model = PhoneNumber

    organization = factory.SubFactory(OrganizationFactory)
    phone_number = factory.Sequence(lambda n: f"+1415555{n % 10000:04d}")


def attempt_rows_create(run: TestRun, results: list[dict[str, Any]]) -> list[TestAttempt]:
    """The attempt rows of `run` for results in the API's shape ([{"testId", "name", "kind", "attempts"}],
    the test at its place in run.test_ids), as a worker stores them one by one."""
    order = [str(test_id) for test_id in run.test_ids]
    return [
        TestAttempt.objects.create(
            run=run,
            position=order.index(str(result["testId"])),
            number=number,
            test_id=result["testId"],
            name=result.get("name", ""),
            kind=result.get("kind", ""),
            verdict=attempt.get("verdict", "error"),
            result=attempt,
        )
        for result in results
        for number, attempt in enumerate(result.get("attempts") or [])
    ]
