"""GET and PATCH /organization: the caller's organization and its outbound settings. It lives on the api
floor (api/__init__.py), above accounts and telephony, since what it shows joins the organization with its
numbers (the destination countries in effect default to the countries of its claimed numbers)."""

from __future__ import annotations

from typing import Any

import phonenumbers
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Organization
from accounts.services import MAX_OUTBOUND_COUNTRIES, organization_outbound_countries_set
from kit.api import PublicApiView
from kit.errors import ApiError
from telephony.selectors import outbound_countries_in_effect

TAGS = ["Organization"]
WRITABLE = ("outboundCountries",)


class OrganizationSerializer(serializers.Serializer[Any]):
    """The organization as GET /organization shows it (described here; built by organization_body)."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    plan = serializers.CharField(help_text="The plan's code: trial, launch, studio or agency.")
    outboundCountries = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="The countries (ISO 3166-1 alpha-2) outbound calls may go to, as set; null: the countries "
        "of the organization's claimed numbers.",
    )
    outboundCountriesInEffect = serializers.ListField(
        child=serializers.CharField(), help_text="The countries outbound calls may go to now."
    )


# The body of PATCH /organization as a raw schema: no other field is taken (a 400 names it).
UPDATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "outboundCountries": {
            "type": ["array", "null"],
            "items": {"type": "string", "enum": sorted(phonenumbers.SUPPORTED_REGIONS)},
            "minItems": 1,
            "maxItems": MAX_OUTBOUND_COUNTRIES,
            "description": "A non-empty list of ISO 3166-1 alpha-2 codes, or null for the countries of the numbers.",
        }
    },
    "additionalProperties": False,
}


def organization_body(organization: Organization) -> dict[str, Any]:
    return {
        "id": str(organization.pk),
        "name": organization.name,
        "plan": organization.plan.code,
        "outboundCountries": organization.outbound_countries,
        "outboundCountriesInEffect": outbound_countries_in_effect(organization=organization),
    }


class OrganizationApi(PublicApiView):
    @extend_schema(
        operation_id="getOrganization",
        tags=TAGS,
        summary="Get the organization",
        description="The organization of the API key, with the countries its outbound calls may go to.",
        responses={200: OrganizationSerializer},
    )
    def get(self, request: Request) -> Response:
        return Response(organization_body(Organization.objects.select_related("plan").get(pk=self.organization.pk)))

    @extend_schema(
        operation_id="updateOrganization",
        tags=TAGS,
        summary="Update the organization's outbound settings",
        description="Sets `outboundCountries`: outbound calls (POST /calls, call batches) to a number of "
        "another country are refused with a 400.",
        request={"application/json": UPDATE_SCHEMA},
        responses={200: OrganizationSerializer, 400: OpenApiResponse(description="Invalid or unknown field")},
    )
    def patch(self, request: Request) -> Response:
        body = request.data
        if not isinstance(body, dict):
            raise ApiError.invalid("The request body must be a JSON object.")
        unknown = sorted(str(key)[:40] for key in body if key not in WRITABLE)
        if unknown:
            raise ApiError.invalid(
                f"Unknown or read-only field(s): {', '.join(unknown)}; writable: {', '.join(WRITABLE)}.",
                {name: ["Unknown or read-only field."] for name in unknown},
            )
        organization = Organization.objects.select_related("plan").get(pk=self.organization.pk)
        if "outboundCountries" in body:
            organization = organization_outbound_countries_set(
                organization=organization, countries=body["outboundCountries"]
            )
        return Response(organization_body(organization))
